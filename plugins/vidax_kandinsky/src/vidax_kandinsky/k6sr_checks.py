"""Kandinsky 6 SR's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core import frame_count_problems
from vidax_core.io.ffmpeg import ffmpeg_module

from .k6_checks import grid_problems
from .k6_presets import TEMPORAL
from .k6sr_tiles import SCALES


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, run.options
    problems = frame_count_problems(s, TEMPORAL, spec.id, "the K-VAE compresses time by 4")
    if run.video is None:
        problems.append(f"{spec.id} refines a clip: give it as video: (an mp4, or a .npy of float frames in [0, 1] "
                        "as output.save_frames writes them)")
    else:
        frames = clip_frames(run.video)
        if frames is not None and frames < s.num_frames:
            problems.append(f"video {run.video} has {frames} frames, sampling.num_frames={s.num_frames}: set it to "
                            "the clip's length or less (4k+1 frames; the first ones are used)")
    if float(o.get("resolution_scale", 2.25)) not in SCALES:
        problems.append(f"options.resolution_scale must be 2, 2.25 or 4, got {o.get('resolution_scale')}")
    if not 0.0 < float(o.get("lq_noise_scale", 0.7)) <= 1.0:
        problems.append(f"options.lq_noise_scale must be in (0, 1], got {o.get('lq_noise_scale')}")
    if not 0.0 <= float(o.get("min_overlap", 0.2)) < 1.0:
        problems.append(f"options.min_overlap must be in [0, 1), got {o.get('min_overlap')}")
    if int(o.get("tiles_batch_size", 1)) < 1:
        problems.append(f"options.tiles_batch_size must be at least 1, got {o.get('tiles_batch_size')}")
    if s.guidance_scale != 1.0:
        problems.append(f"{spec.id} has no guidance (the SR DiT takes no prompt): set sampling.guidance_scale=1, "
                        f"got {s.guidance_scale}")
    return problems


def clip_frames(path: str) -> int | None:
    """The frame count of a clip from its header (``.npy``) or ffmpeg's count; None when the file is not there yet
    (a frame stage's clip) or cannot be counted (the pre-run media check reports a broken file)."""
    import os

    if not os.path.isfile(path):
        return None
    try:
        if path.endswith(".npy"):
            from vidax_core.io.media import npy_clip_shape

            return npy_clip_shape(path)[0]
        imageio_ffmpeg = ffmpeg_module()

        return int(imageio_ffmpeg.count_frames_and_secs(path)[0])
    except Exception:  # noqa: BLE001 - a foreign file: preflight's media check names the problem
        return None


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_kandinsky.k6sr_dit.Kandinsky6SRDiTConfig`; config files only."""
    from .k6sr_dit import token_grid_problems
    from .k6sr_tiles import geometry
    from .k6sr_vae import Kandinsky6SRVAEConfig

    where = "transformer/config.json"
    if not ckpt.has("vae"):
        return [f"{ckpt.source} has no vae/ folder: the SR stage needs its K-VAE"]
    vae = Kandinsky6SRVAEConfig.from_config(ckpt.config("vae"))
    problems = []
    if vae.latent_channels != dit.in_visual_dim:
        problems.append(f"{where}: in_visual_dim={dit.in_visual_dim} differs from latent_channels="
                        f"{vae.latent_channels} of vae/config.json: the two components do not belong together")
    if ckpt.has("latent_upscaler"):
        from .k6sr_upscaler import Kandinsky6SRUpscalerConfig

        up = Kandinsky6SRUpscalerConfig.from_config(ckpt.config("latent_upscaler"))
        if up.in_channels != vae.latent_channels:
            problems.append(f"latent_upscaler/config.json: in_channels={up.in_channels} differs from latent_channels="
                            f"{vae.latent_channels} of vae/config.json")
    problems += grid_problems(ckpt, run, dit, where)
    s, o = run.sampling, run.options
    snap = vae.spatial_ratio
    for key in ("height", "width"):
        if getattr(s, key) % snap:
            v = getattr(s, key)
            problems.append(f"sampling.{key} must be a multiple of {snap} for {spec.id} (the K-VAE's factor), got "
                            f"{v}: use {max(snap, v // snap * snap)} (the clip is resized to it)")
    if problems or float(o.get("resolution_scale", 2.25)) not in SCALES:
        return problems
    try:
        geom = geometry(s.height, s.width, s.num_frames, float(o.get("resolution_scale", 2.25)),
                        float(o.get("min_overlap", 0.2)), dit.tile_sizes, snap, vae.temporal_compression_ratio)
    except ValueError as exc:
        return [f"sampling.height x width {s.height}x{s.width}: {exc}"]
    return [f"{where}: {p}" for p in token_grid_problems(dit, geom.latent_grid)]
