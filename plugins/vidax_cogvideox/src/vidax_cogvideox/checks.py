"""CogVideoX's run checks (hook ``check_run``) and checkpoint-dependent ones (hook ``check_checkpoint``): config files
only, before any weight loads.

* an original SAT folder is refused with one line naming the diffusers repo;
* the denoiser must fit the task: image-to-video DiTs take the noise and the image latents (in = 2 x out),
  text-to-video DiTs the noise alone; its output channels must be the VAE's latent channels;
* 5B-I2V's learned position table fixes the size (its ``sample_height`` x ``sample_width`` latents: 720x480 for
  the published model) and the text length (``max_text_seq_length`` = 226);
* CogVideoX1.5-I2V takes a minimum side of 768 and a maximum side of at most 1360 (its model card), checked for
  checkpoints of that size class (config sample size of at least 768 px; tiny test checkpoints are exempt).
"""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems

import os
from typing import Any

from vidax_core.io.arch import SOURCE_KEY

SPATIAL, TEMPORAL = 8, 4  # VAE compression
I2V_15_MIN_SIDE, I2V_15_MAX_SIDE = 768, 1360


def checkpoint_config_problems(spec: Any, ckpt: Any, run: Any) -> list[str]:
    """The plugin's check_checkpoint, not the default's ``checkpoint_problems``: a SAT release folder is named
    before transformer/config.json is parsed."""
    from vidax_core.errors import UserError

    from .dit import CogVideoXDiTConfig

    from .original_format import is_sat_folder, sat_message

    root = getattr(ckpt, "root", None)
    if root and not os.path.isfile(os.path.join(root, "transformer", "config.json")) and is_sat_folder(root):
        return [sat_message(spec, root)]
    raw = ckpt.config("transformer")
    where = str(raw.get(SOURCE_KEY) or "transformer/config.json")
    try:
        cfg = CogVideoXDiTConfig.from_config(raw)
    except UserError as exc:
        return [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
        return [f"{where}: unusable ({' '.join(str(exc).split())[:160]})"]
    problems: list[str] = []
    i2v = "i2v" in spec.tasks
    if i2v and cfg.in_channels != 2 * cfg.out_channels:
        problems.append(f"{where}: in_channels={cfg.in_channels} is a text-to-video denoiser, but {spec.id} is "
                        f"image-to-video (noise + image latents: in_channels = 2 x out_channels): use a {spec.id} "
                        "checkpoint or a text-to-video model id")
    elif not i2v and cfg.in_channels != cfg.out_channels:
        problems.append(f"{where}: in_channels={cfg.in_channels} is an image-to-video denoiser, but {spec.id} is "
                        f"text-to-video: use a {spec.id} checkpoint or the -i2v model id")
    if ckpt.has("vae"):
        c = ckpt.config("vae").get("latent_channels", 16)
        if cfg.out_channels != c:
            problems.append(f"{where}: out_channels={cfg.out_channels} does not match latent_channels={c} of "
                            "vae/config.json")
    s = run.sampling
    if cfg.use_learned_positional_embeddings:
        h, w = cfg.sample_height * SPATIAL, cfg.sample_width * SPATIAL
        if (s.height, s.width) != (h, w):
            problems.append(f"{spec.id} runs only at {w}x{h} (its learned position table fixes the size), got "
                            f"{s.width}x{s.height}: use sampling.height={h} sampling.width={w}")
        if s.max_sequence_length != cfg.max_text_seq_length:
            problems.append(f"sampling.max_sequence_length must be {cfg.max_text_seq_length} for {spec.id} (its "
                            f"learned position table covers that many text tokens), got {s.max_sequence_length}")
    if (spec.id.startswith("cogvideox1.5") and i2v
            and min(cfg.sample_height, cfg.sample_width) * SPATIAL >= I2V_15_MIN_SIDE):
        lo, hi = min(s.height, s.width), max(s.height, s.width)
        if lo != I2V_15_MIN_SIDE or hi > I2V_15_MAX_SIDE:
            problems.append(f"{spec.id} takes a minimum side of {I2V_15_MIN_SIDE} and a maximum side of at most "
                            f"{I2V_15_MAX_SIDE} (a multiple of 16), got {s.width}x{s.height}: use e.g. "
                            "sampling.height=768 sampling.width=1360")
    return problems


def grid_limit(cfg):
    """The token grid CogVideoX's position embedding covers: 5B-I2V's learned table is one size (its training
    grid, any frame count), CogVideoX1.5's RoPE grid is sliced from one of ``sample_height x sample_width``; the
    1.0 RoPE is resized to any grid (None)."""
    from vidax_core import GridLimit

    p = cfg.patch_size
    grid = (None, cfg.sample_height // p, cfg.sample_width // p)
    where = (f"sample_height={cfg.sample_height}, sample_width={cfg.sample_width} (latent pixels) / patch_size={p} in "
             "transformer/config.json")
    if cfg.use_learned_positional_embeddings:
        return GridLimit(grid, f"{where} (the learned position table)", exact=True)
    if cfg.use_rotary_positional_embeddings and cfg.patch_size_t is not None:
        return GridLimit(grid, f"{where} (the RoPE grid)")
    return None


def run_problems(spec, run) -> list[str]:
    """Frame count, size, the task's inputs and the VAE tiling knobs, before any weight loads."""
    s = run.sampling
    problems = []
    step = 2 * TEMPORAL  # an odd latent frame count: the VAE decodes an even one into 3 extra frames
    hint = " (CogVideoX1.5 is trained on 16N+1: 81)" if spec.id.startswith("cogvideox1.5") else ""
    problems += frame_count_problems(s.num_frames, step, "CogVideoX", "the VAE compresses time by 4 and decodes an "
                                     "odd latent frame count", hint)
    problems += size_problems(s, SPATIAL * 2, "CogVideoX")  # VAE factor x the DiT's 2x2 patch
    if "i2v" in spec.tasks and run.image is None:
        problems.append(f"{spec.id} is an image-to-video model: set image: <path to a png or jpg>")
    if "i2v" not in spec.tasks and run.image is not None:
        problems.append(f"{spec.id} is a text-to-video model and takes no image: drop image: or use "
                        f"{spec.id}-i2v")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    tiling = getattr(getattr(run, "vae", None), "tiling", False)
    if tiling:  # diffusers' enable_tiling knobs, checked by the VAE module before anything loads
        from vidax_core.errors import UserError

        from .vae import check_tiling

        try:
            check_tiling(tiling)
        except UserError as exc:
            problems.append(str(exc))
    return problems


def vae_factors(config: dict) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLCogVideoX`` config."""
    blocks = config.get("block_out_channels") or (128, 256, 256, 512)
    from vidax_core.io.arch import config_value

    blocks = config_value(config, "block_out_channels", tuple[int, ...], (128, 256, 256, 512))
    return config_value(config, "temporal_compression_ratio", int, TEMPORAL), 2 ** (len(blocks) - 1)


def patch_t(ckpt) -> int:
    from vidax_core.io.arch import config_value

    return config_value(ckpt.config("transformer"), "patch_size_t", int, 1)
