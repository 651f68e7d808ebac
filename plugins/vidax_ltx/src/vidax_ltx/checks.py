"""LTX-Video's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems

from . import presets
from .recipe import uses_condition_pipeline


def run_problems(spec, run) -> list[str]:
    """Frame count, size, the recipe's options and the per-step guidance lists, before any weight loads."""
    s = run.sampling
    problems = []
    problems += frame_count_problems(s.num_frames, 8, "LTX-Video", "the VAE compresses time by 8")
    o = run.options
    problems += _check_recipe(run)
    if not o.get("multiscale"):
        problems += size_problems(s, 32, "LTX-Video (the VAE compresses space by 32)")
    if o.get("frame_rate") is not None and not 0.01 <= float(o["frame_rate"]) <= 1000:
        problems.append(f"options.frame_rate must be from 0.01 to 1000 frames per second, got {o['frame_rate']}")
    ts = o.get("timesteps")
    if ts is not None:
        if not ts or any(not 0.0 <= float(t) <= 1000.0 for t in ts) or any(a <= b for a, b in zip(ts, ts[1:])):
            problems.append("options.timesteps must be a non-empty, strictly decreasing list of model timesteps in "
                            "[0, 1000], e.g. [1000, 993, 987, 981, 975, 909, 725, 0.03]")
    if o.get("decode_noise_scale") is not None and not 0.0 <= float(o["decode_noise_scale"]) <= 1.0:
        problems.append(f"options.decode_noise_scale must be in [0, 1], got {o['decode_noise_scale']}")
    if run.video is not None and not uses_condition_pipeline(run):
        problems.append("video: conditioning belongs to LTXConditionPipeline: set options.pipeline=condition")
    if run.video is not None and run.image is not None:
        problems.append("set only one of image: and video: (LTX-Video conditions on one item)")
    given = [k for k in presets.PER_STEP_KEYS if o.get(k) is not None]
    if given and len(given) < len(presets.PER_STEP_KEYS):
        missing = [k for k in presets.PER_STEP_KEYS if k not in given]
        problems.append(f"per-step guidance needs all of options.{', options.'.join(presets.PER_STEP_KEYS)}: "
                        f"set {', '.join('options.' + k for k in missing)}")
    elif given:
        n = {len(o[k]) for k in presets.PER_STEP_KEYS}
        if len(n) != 1 or 0 in n:
            problems.append("options.guidance_timesteps, guidance_scales, stg_scales, guidance_rescales and "
                            f"stg_skip_blocks must be non-empty lists of one length, got lengths "
                            f"{[len(o[k]) for k in presets.PER_STEP_KEYS]}")
    return problems


def _check_recipe(run) -> list[str]:
    """The LTXConditionPipeline and multi-scale options."""
    o, s = run.options, run.sampling
    problems = []
    cond = uses_condition_pipeline(run)
    strength = float(o.get("denoise_strength", 1.0))
    if not 0.0 < strength <= 1.0:
        problems.append(f"options.denoise_strength must be in (0, 1], got {strength}")
    if not 0.0 <= float(o.get("strength", 1.0)) <= 1.0:
        problems.append(f"options.strength must be in [0, 1], got {o.get('strength')}")
    if not 0.0 <= float(o.get("image_cond_noise_scale") or 0.0) <= 10.0:
        problems.append(f"options.image_cond_noise_scale must be in [0, 10], got {o.get('image_cond_noise_scale')}")
    problems += _check_keyframe(run) + _check_conditions(run)
    if not cond:
        changed = [k for k in ("denoise_strength", "strength") if float(o.get(k, 1.0)) != 1.0]
        changed += [k for k in ("frame_index", "image_cond_noise_scale") if float(o.get(k) or 0)]
        changed += ["conditions"] if o.get("conditions") else []
        if changed or o.get("multiscale"):
            what = ", ".join(f"options.{k}" for k in changed) or "options.multiscale"
            problems.append(f"{what} belongs to LTXConditionPipeline: set options.pipeline=condition, or drop it "
                            "for options.pipeline=ltx")
    elif s.initial_noise is not None and strength >= 1.0:
        problems.append("with options.pipeline=condition, sampling.initial_noise holds the latents= to re-noise "
                        "(unpacked, (1, C, F, H, W)) and is used only with options.denoise_strength < 1, as "
                        "LTXConditionPipeline ignores it otherwise: set options.denoise_strength, or drop "
                        "sampling.initial_noise")
    if o.get("multiscale"):
        from .multiscale import pass_sizes

        factor = float(o.get("downscale_factor") or 0.0)
        if not 0.0 < factor <= 1.0:
            problems.append(f"options.downscale_factor must be in (0, 1], got {o.get('downscale_factor')}")
        elif min(pass_sizes(s.height, s.width, factor)[0]) < 32:
            problems.append(f"options.multiscale: the first pass at {factor:.3g} of {s.width}x{s.height} is "
                            f"{int(s.width * factor)}x{int(s.height * factor)}, below the VAE's 32 pixels once "
                            "rounded: raise sampling.height/width or options.downscale_factor")
        second = float(o.get("second_pass_denoise_strength", 1.0))
        if not 0.0 < second <= 1.0:
            problems.append(f"options.second_pass_denoise_strength must be in (0, 1], got {second}")
        ts = o.get("second_pass_timesteps")
        if ts is not None and (not ts or any(not 0.0 <= float(t) <= 1000.0 for t in ts)
                               or any(a <= b for a, b in zip(ts, ts[1:]))):
            problems.append("options.second_pass_timesteps must be a non-empty, strictly decreasing list of model "
                            "timesteps in [0, 1000], e.g. [1000, 909, 725, 421, 0]")
        if o.get("second_pass_steps") is not None and int(o["second_pass_steps"]) < 1:
            problems.append(f"options.second_pass_steps must be at least 1, got {o['second_pass_steps']}")
    return problems


def _check_conditions(run) -> list[str]:
    """``options.conditions``: a list of {image: PATH} / {video: PATH} items, each with an existing file, an optional
    frame_index inside the video and a strength in [0, 1]."""
    import os

    items = run.options.get("conditions")
    if not items:
        return []
    n = run.sampling.num_frames
    media_items = []
    for k, c in enumerate(items):
        where = f"options.conditions[{k}]"
        keys = set(c) if isinstance(c, dict) else set()
        media = keys & {"image", "video"}
        if not isinstance(c, dict) or len(media) != 1 or keys - {"image", "video", "frame_index", "strength"}:
            return [f"{where} must be {{image: PATH}} or {{video: PATH}}, optionally with frame_index and strength, "
                    f"got {c!r}"[:300]]
        kind = media.pop()
        path = c[kind]
        if not isinstance(path, str) or not os.path.isfile(path):
            return [f"{where}: {path!r} is not a file"]
        media_items.append((where, kind, path))
        fi, st = c.get("frame_index", 0), c.get("strength", 1.0)
        if isinstance(fi, bool) or not isinstance(fi, int) or not 0 <= fi < n:
            return [f"{where}.frame_index must be an integer in [0, {n - 1}], got {fi!r}"]
        if isinstance(st, bool) or not isinstance(st, (int, float)) or not 0.0 <= float(st) <= 1.0:
            return [f"{where}.strength must be in [0, 1], got {st!r}"]
    if not uses_condition_pipeline(run):  # the items are not used: the run checks say so
        return []
    from vidax_core.errors import UserError
    from vidax_core.io.media import check_medium

    for where, kind, path in media_items:
        try:  # the same pre-run check as image: / video:
            check_medium(path, video=kind == "video", where=f"{where}.{kind}")
        except UserError as exc:
            return [str(exc)]
    return []


def _check_keyframe(run) -> list[str]:
    """``options.frame_index``: needs ``image:``, lies inside the video, and its extra tokens keep every pass's
    sequence divisible by ``parallel.sp``."""
    o, s = run.options, run.sampling
    k = int(o.get("frame_index") or 0)
    if not k:
        return []
    if k < 0 or k >= s.num_frames:
        return [f"options.frame_index must be in [0, {s.num_frames - 1}] (a frame of the {s.num_frames}-frame video), "
                f"got {k}"]
    if run.image is None and run.video is None:
        return ["options.frame_index places the image: or video: given, and the run has none: set image=... or "
                "drop options.frame_index"]
    if run.image is None:  # a clip's token count depends on its length: checked when it is read
        return []
    sizes = [(s.height, s.width)]
    if o.get("multiscale") and 0.0 < float(o.get("downscale_factor") or 0.0) <= 1.0:
        from .multiscale import pass_sizes

        sizes = list(pass_sizes(s.height, s.width, float(o["downscale_factor"])))
    sp = int(getattr(getattr(run, "parallel", None), "sp", 1) or 1)
    frames = (s.num_frames - 1) // 8 + 1
    for h, w in sizes:
        tokens = (frames + 1) * (h // 32) * (w // 32)
        if tokens % sp:
            return [f"options.frame_index adds the keyframe's {(h // 32) * (w // 32)} tokens to the video's: "
                    f"{tokens} tokens at {w}x{h} do not split over parallel.sp={sp}; change parallel.sp or the size"]
    return []


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """The DiT config must fit LTX-Video and the VAE's latent channels; read from config files only."""
    problems: list[str] = []
    blocks = run.options.get("stg_skip_blocks") or []
    bad = sorted({b for entry in blocks for b in entry if not 0 <= int(b) < dit.num_layers})
    if bad:
        problems.append(f"options.stg_skip_blocks names blocks {bad}, but transformer/config.json has num_layers="
                        f"{dit.num_layers}: use indices 0..{dit.num_layers - 1}")
    if run.options.get("multiscale"):
        from .multiscale import check_upsampler

        problems += check_upsampler(ckpt, dict(run.options))
    if ckpt.has("vae"):
        vae = ckpt.config("vae")
        from vidax_core.io.arch import config_value

        c = config_value(vae, "latent_channels", int, 128)
        if dit.in_channels != c * dit.patch_size_t * dit.patch_size**2:
            problems.append(f"transformer/config.json: in_channels={dit.in_channels} "
                            f"does not match latent_channels={c} of vae/config.json")
    return problems
