"""LTX-2.x run and checkpoint checks: one-line problems found before any weight loads (JAX-free)."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems

WHO = "LTX-2.x"
COMPONENTS = ("connectors", "audio_vae", "vocoder")


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, run.options
    problems = [] if s.num_frames is None else frame_count_problems(s.num_frames, 8, WHO,
                                                                      "the video VAE compresses time by 8")
    if s.num_frames is None and s.initial_noise:
        problems.append("sampling.initial_noise fixes the latent frames, so the duration head cannot choose them: "
                        "set sampling.num_frames to the frames of the given latents")
    if not 0.0 < float(o["min_seconds"]) < float(o["max_seconds"]) <= 3600:
        problems.append(f"options.min_seconds ({o['min_seconds']}) must be above 0 and below options.max_seconds "
                        f"({o['max_seconds']}), at most 3600")
    problems += size_problems(s, 32, f"{WHO} (the video VAE compresses space by 32)")
    for key in ("frame_rate", "motion_speed"):
        if not 0.01 <= float(o[key]) <= 1000:
            problems.append(f"options.{key} must be from 0.01 to 1000, got {o[key]}")
    if not 0.0 <= float(o["noise_scale"]) <= 1.0:
        problems.append(f"options.noise_scale must be in [0, 1], got {o['noise_scale']}")
    stg = float(o["stg_scale"]) > 0 or float(o.get("audio_stg_scale") or 0.0) > 0
    blocks = o.get("spatio_temporal_guidance_blocks")
    if stg and not blocks:
        problems.append("spatio-temporal guidance is on (options.stg_scale or audio_stg_scale > 0) but "
                        "options.spatio_temporal_guidance_blocks is empty: name blocks, e.g. [28], or set both "
                        "scales to 0")
    sigmas = o.get("sigmas")
    if sigmas is not None and (not sigmas or any(not 0.0 < float(x) <= 1.0 for x in sigmas)
                               or any(a <= b for a, b in zip(sigmas, sigmas[1:]))):
        problems.append("options.sigmas must be a non-empty, strictly decreasing list in (0, 1], e.g. the "
                        "distilled [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875]")
    if sigmas is not None and len(sigmas) != s.num_steps:
        problems.append(f"options.sigmas has {len(sigmas)} entries but sampling.num_steps is {s.num_steps}: set "
                        f"sampling.num_steps={len(sigmas)}")
    if o.get("decode_noise_scale") is not None and not 0.0 <= float(o["decode_noise_scale"]) <= 1.0:
        problems.append(f"options.decode_noise_scale must be in [0, 1], got {o['decode_noise_scale']}")
    if run.video is not None:
        problems.append(f"{spec.id} conditions on one image (image:), not on a video: remove video:")
    if o.get("video_decoder") == "diffusion" and (float(o.get("decode_timestep") or 0.0) != 0.0
                                                  or o.get("decode_noise_scale") is not None):
        problems.append("options.decode_timestep and decode_noise_scale condition the convolutional VAE's decoder; "
                        "the diffusion decoder (options.video_decoder=diffusion) draws its own noise: leave them at "
                        "0 / null")
    if o.get("video_decoder") == "diffusion" and run.vae.tiling:
        problems.append("vae.tiling: the diffusion decoder decodes the whole video (its tiled decode is not "
                        "implemented): set vae.tiling=false, or options.video_decoder=vae")
    if o.get("two_stage"):
        from .ltx2_two_stage import run_problems as two_stage_problems

        problems += two_stage_problems(run)
    if o.get("image_crf") is not None and not 0 <= int(o["image_crf"]) <= 51:
        problems.append(f"options.image_crf must be from 0 (off) to 51, got {o['image_crf']}")
    return problems


def checkpoint_problems(spec, ckpt, run, dit_cfg) -> list[str]:
    problems = [f"{ckpt.source} has no {c}/ folder, which {spec.id} needs (an LTX2Pipeline save_pretrained "
                "folder holds it)" for c in COMPONENTS if not ckpt.has(c)]
    o = run.options
    if run.sampling.num_frames is None and not ckpt.has("duration_head"):
        problems.append(f"sampling.num_frames is not set and {ckpt.source} has no duration_head/ to predict it: "
                        "set sampling.num_frames=121 (any 8k+1)")
    if o.get("video_decoder") == "diffusion":
        problems += diffusion_decoder_problems(ckpt, run)
    if o.get("two_stage"):
        from .ltx2_two_stage import upsampler_problems

        problems += upsampler_problems(ckpt, dict(o))
    problems += text_layer_problems(ckpt)
    blocks = o.get("spatio_temporal_guidance_blocks") or ()
    bad = [b for b in blocks if not 0 <= int(b) < dit_cfg.num_layers]
    if bad:
        problems.append(f"options.spatio_temporal_guidance_blocks {bad} are not blocks of this DiT (0 to "
                        f"{dit_cfg.num_layers - 1})")
    return problems


def text_layer_problems(ckpt) -> list[str]:
    """The connectors read every hidden state of the text encoder: their ``text_proj_in_factor`` is its layers + 1
    (checked from the JSON files, before anything loads; a mismatch failed only after the encoder ran)."""
    if not (ckpt.has("connectors") and ckpt.has("text_encoder")):
        return []
    try:
        want = int(ckpt.config("connectors").get("text_proj_in_factor") or 0)
        te = ckpt.config("text_encoder")
        layers = int((te.get("text_config") or te).get("num_hidden_layers") or 0)
    except Exception:  # noqa: BLE001 - an unreadable config is reported by the loader that reads it
        return []
    if want and layers and layers + 1 != want:
        return [f"text_encoder/config.json has {layers} layers, but the connectors read {want - 1} layers' hidden "
                "states (connectors/config.json text_proj_in_factor = layers + 1): use the text encoder the "
                "checkpoint was made with"]
    return []


def diffusion_decoder_problems(ckpt, run) -> list[str]:
    """``options.video_decoder=diffusion``: the checkpoint has the component, its config parses and every stage's
    grid holds its neighborhood at this size."""
    from vidax_core.errors import UserError

    from .ltx2_diffusion_decode import COMPONENT

    if not ckpt.has(COMPONENT):
        return [f"options.video_decoder=diffusion needs the LTX-2.5 diffusion decoder, and {ckpt.source} has no "
                f"{COMPONENT}/ folder: add it (diffusers LTX2VideoDiffusionDecoderModel, config.json + "
                "safetensors) or set options.video_decoder=vae"]
    from .ltx2_diffusion_decoder import LTX2DiffusionDecoderConfig

    try:
        cfg = LTX2DiffusionDecoderConfig.from_config(ckpt.config(COMPONENT))
    except UserError as exc:
        return [str(exc)]
    s = run.sampling
    if s.num_frames is None:
        return []
    f, h, w = (s.num_frames - 1) // cfg.temporal_compression_ratio + 1, s.height // 32, s.width // 32
    problems = cfg.grid_problems(f, h, w)
    if problems:
        return [f"{problems[0]} at {s.width}x{s.height}, {s.num_frames} frames: use a larger size or "
                "options.video_decoder=vae"]
    from .ltx2_diffusion_decode import draw_problems

    return draw_problems(s.initial_noise, [(1, cfg.out_channels, s.num_frames, s.height, s.width)])
