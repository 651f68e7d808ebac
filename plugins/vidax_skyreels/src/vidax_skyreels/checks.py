"""SkyReels-V2's run checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems

from .forcing import geometry, latent_frames
from .presets import DIFFUSION_FORCING

TEMPORAL_FACTOR = 4  # the Wan VAE compresses time by 4
SPATIAL_MULTIPLE = 16  # the VAE's 8 x the DiT's 2x2 patch
MAX_ADDNOISE = 1000  # a timestep: past it the re-noise factor 0.001 a exceeds 1 and overflows at 1e308


def run_problems(spec, run) -> list[str]:
    s = run.sampling
    problems = frame_count_problems(s.num_frames, TEMPORAL_FACTOR, "SkyReels-V2", "the VAE compresses time by 4")
    problems += size_problems(s, SPATIAL_MULTIPLE, spec.id)
    if "i2v" in spec.tasks and run.image is None:
        problems.append(f"{spec.id} makes video from an image: set `image: path/to/first_frame.png`")
    if spec.id in DIFFUSION_FORCING and not problems:
        problems += forcing_problems(run)
    return problems


def forcing_problems(run) -> list[str]:
    """The diffusion-forcing options against each other and the video length: the pipeline's own refusals, and
    the windows it would plan that it cannot run (a window of latent frames that does not split into causal
    blocks leaves its last frames pure noise in the reference)."""
    o = dict(run.options or {})
    frames, base, lap = run.sampling.num_frames, int(o.get("base_num_frames") or 97), o.get("overlap_history")
    cbs, ar = o.get("causal_block_size"), int(o.get("ar_step") or 0)
    if base < 1 or (base - 1) % TEMPORAL_FACTOR:
        return [f"options.base_num_frames must be 4k+1 (the VAE compresses time by 4), got {base}: use "
                f"{(max(base, 1) - 1) // 4 * 4 + 1}"]
    if ar < 0:
        return [f"options.ar_step must be 0 (synchronous) or more (asynchronous), got {ar}"]
    if cbs is not None and cbs < 1:
        return [f"options.causal_block_size must be at least 1 latent frame, got {cbs}"]
    noise = float(o.get("addnoise_condition") or 0)
    if not 0 <= noise <= MAX_ADDNOISE:  # NaN fails both: the prefix re-noise x (1 - 0.001 a) + noise 0.001 a
        return [f"options.addnoise_condition must be from 0 to {MAX_ADDNOISE} (a timestep of the prefix's "
                f"re-noise, 20 in the reference's recipe), got {o.get('addnoise_condition')}"]
    if frames > base and lap is None:
        return [f"options.overlap_history is required when num_frames ({frames}) exceeds options.base_num_frames "
                f"({base}): the video is made in windows that overlap by that many frames (17 or 37 in the "
                "reference's recipe)"]
    if lap is not None and frames > base:
        if lap < 1 or latent_frames(lap) >= latent_frames(base):
            return [f"options.overlap_history={lap} must be at least 1 and shorter than options.base_num_frames="
                    f"{base} (in latent frames: {latent_frames(lap)} vs {latent_frames(base)}): try 17"]
    geo = geometry(run)
    size = int(cbs or 1)
    bad = [f for f in geo.frames if f % size]
    if bad:
        return [f"options.causal_block_size={size} must divide every window's latent frames, but this run's "
                f"windows have {_sizes(geo.frames)}: change num_frames, base_num_frames or "
                "overlap_history (the reference's recipe: base_num_frames 97 with causal_block_size 5)"]
    return []


def _sizes(frames) -> str:
    """Window lengths in latent frames, each distinct length once with its count (a long video has hundreds)."""
    counts = {f: list(frames).count(f) for f in dict.fromkeys(frames)}
    return ", ".join(f"{f}" if n == 1 else f"{f} (x{n})" for f, n in counts.items())


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """An image-to-video denoiser for a text id or the reverse, one whose latents are not the VAE's."""
    problems = []
    if "i2v" in spec.tasks:
        want = 2 * dit.out_channels + TEMPORAL_FACTOR
        if dit.in_channels != want or dit.image_dim is None:
            problems.append(f"transformer/config.json: in_channels={dit.in_channels}, image_dim={dit.image_dim}: "
                            f"{spec.id} needs an image-to-video denoiser ({want} input channels: latents, mask and "
                            "image latents; CLIP image tokens): use a SkyReels-V2-I2V checkpoint")
        elif not ckpt.has("image_encoder"):
            problems.append(f"the checkpoint has no image_encoder/ folder: {spec.id} encodes the image with CLIP")
    elif dit.in_channels != dit.out_channels:
        problems.append(f"transformer/config.json: in_channels={dit.in_channels} differs from out_channels="
                        f"{dit.out_channels} (an image-to-video denoiser), but {spec.id} feeds it only the noisy "
                        f"latents: use a {spec.id} checkpoint")
    z_dim = ckpt.config("vae").get("z_dim") if ckpt.has("vae") else None
    if z_dim is not None and dit.out_channels != z_dim:
        problems.append(f"transformer/config.json: out_channels={dit.out_channels} does not match z_dim={z_dim} of "
                        "vae/config.json")
    return problems
