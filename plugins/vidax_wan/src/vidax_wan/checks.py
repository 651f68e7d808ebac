"""Wan's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from typing import Any, Callable

from vidax_core.run_checks import frame_count_problems, size_problems
from vidax_core.wan_dit.limits import grid_limit  # noqa: F401 - the Wan plugin states it

from . import presets
from .experts import has_component

TEMPORAL_FACTOR = 4  # VAE temporal compression


def run_problems(spec, run) -> list[str]:
    s = run.sampling
    problems = frame_count_problems(s.num_frames, TEMPORAL_FACTOR, "Wan", "the VAE compresses time by 4")
    problems += size_problems(s, presets.spatial_multiple(spec.id), spec.id)  # VAE factor x DiT patch size
    if run.image is None and "t2v" not in spec.tasks and "ti2v" not in spec.tasks:
        problems.append(f"{spec.id} is an image-to-video model: set image: <path to a png or jpg>")
    return problems


def checkpoint_config_problems(spec, ckpt) -> list[str]:
    """Does the checkpoint fit this model id? Read from its config files only, before any weight loads. It parses
    every config itself (both experts and the VAE), so the plugin's own check_checkpoint calls it, not the
    default's ``checkpoint_problems``."""
    from vidax_core import SOURCE_KEY, UserError
    from vidax_core.vae.wan21 import WanVAEConfig

    from vidax_core.wan_dit.model import WanDiTConfig

    problems: list[str] = []

    def read(component: str, build: Callable[[dict], Any]) -> tuple[Any, str]:
        raw = ckpt.config(component)
        where = str(raw.get(SOURCE_KEY) or f"{component}/config.json")
        try:
            return build(raw), where
        except UserError as exc:
            problems.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
            problems.append(f"{where}: unusable value ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
        return None, where

    dits = [c for c in ("transformer", "transformer_2") if c == "transformer" or has_component(ckpt, c)]
    vae, vae_file = read("vae", WanVAEConfig.from_config) if ckpt.has("vae") else (None, "")
    image_model = "i2v" in spec.tasks and "t2v" not in spec.tasks
    for component in dits:
        dit, where = read(component, WanDiTConfig.from_config)
        if dit is None:
            continue
        if image_model and dit.in_channels <= dit.out_channels:
            problems.append(
                f"{where}: in_channels={dit.in_channels} is a text-to-video denoiser, but {spec.id} is image-to-video "
                f"(it needs the noise, mask and image latents: in_channels > out_channels): use a {spec.id} checkpoint "
                "or a text-to-video model id"
            )
        elif not image_model and dit.in_channels != dit.out_channels:
            problems.append(
                f"{where}: in_channels={dit.in_channels} differs from out_channels={dit.out_channels} "
                f"(an image-to-video denoiser), but {spec.id} feeds it only the noisy latents: "
                f"use a {spec.id} checkpoint or an image-to-video model id"
            )
        if dit.attention_head_dim < 6 or dit.attention_head_dim % 2:
            problems.append(f"{where}: attention_head_dim must be an even number of at least 6 (rotary embedding), "
                            f"got {dit.attention_head_dim}")
        if vae is not None and dit.out_channels != vae.z_dim:
            problems.append(f"{where}: out_channels={dit.out_channels} does not match z_dim={vae.z_dim} of {vae_file}")
    if vae is not None:
        for key in ("latents_mean", "latents_std"):
            n = len(getattr(vae, key))
            if n != vae.z_dim:
                problems.append(f"{vae_file}: {key} has {n} entries, z_dim is {vae.z_dim}: they must agree")
        if any(not s > 0 for s in vae.latents_std):
            problems.append(f"{vae_file}: latents_std must be positive numbers")
    return problems
