"""The official LTX-Video 0.9.8 multi-scale recipe as one run (``options.multiscale: true``, the presets' default).

diffusers' LTX-Video docs chain three calls; vidax runs them as passes of one run (prompts encoded once, the DiT
loaded once):

1. LTXConditionPipeline at ``downscale_factor`` (2/3) of the requested size, each side rounded down to a multiple
   of the VAE's 32, with the first-pass schedule (``options.timesteps`` or ``sampling.num_steps``);
2. LTXLatentUpsamplePipeline(latents=..., adain_factor, tone_map_compression_ratio): the spatial latent upscaler
   doubles the latent height and width (:func:`vidax_ltx.upsampler.upsample_latents`);
3. LTXConditionPipeline at twice the first size with ``options.second_pass_timesteps`` (or
   ``second_pass_steps``) entered at ``second_pass_denoise_strength``, from the upscaled latents.

The decoded frames are then resized to the requested size (the recipe's step 4). Each pass draws its noise with
the run's seed, as the recipe hands each call a generator seeded alike. The upscaler is
``options.spatial_upsampler`` (a diffusers ``latent_upsampler`` folder or the original
``ltxv-spatial-upscaler-*.safetensors``), else the checkpoint's own ``latent_upsampler/`` folder or an upscaler file
beside an original release file.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Any

from vidax_core.errors import UserError
from vidax_core.model_api import SamplingPass

SPATIAL = 32


def pass_sizes(height: int, width: int, factor: float,
               spatial: int = SPATIAL) -> tuple[tuple[int, int], tuple[int, int]]:
    """((h1, w1), (h2, w2)): the first pass's size (``int(side * factor)`` rounded down to a multiple of
    ``spatial``) and the second pass's (twice that),
    as the recipe's ``round_to_nearest_resolution_acceptable_by_vae``."""
    h1, w1 = int(height * factor), int(width * factor)
    h1, w1 = h1 - h1 % spatial, w1 - w1 % spatial
    return (h1, w1), (2 * h1, 2 * w1)


def find_upsampler(ckpt: Any, options: dict) -> str | None:
    """The upscaler to load: ``options.spatial_upsampler``, the checkpoint's ``latent_upsampler/`` folder, or one
    ``ltxv-spatial-upscaler*.safetensors`` beside the checkpoint's files; None when there is none."""
    given = options.get("spatial_upsampler")
    if given:
        return os.path.expanduser(str(given))
    if ckpt.has("latent_upsampler"):
        return ckpt.path("latent_upsampler")
    root = getattr(ckpt, "root", None)
    found = sorted(glob.glob(os.path.join(root, "*spatial-upscaler*.safetensors"))) if root else []
    return found[0] if found else None


def layout_only(ckpt: Any, options: dict, path: str) -> bool:
    """Whether ``path`` is the ``latent_upsampler/`` of a checkpoint without weights (a dry run of the published
    layout, :mod:`vidax_core.io.published`): the layout lists it, no file is there to open."""
    return (getattr(ckpt, "published", False) and not options.get("spatial_upsampler")
            and path == ckpt.path("latent_upsampler"))


def check_upsampler(ckpt: Any, options: dict) -> list[str]:
    """Before anything loads: the multi-scale recipe needs an upscaler that exists."""
    path = find_upsampler(ckpt, options)
    if path is not None and layout_only(ckpt, options, path):
        return []
    if path is None:
        return [f"options.multiscale needs the spatial latent upscaler and checkpoint {ckpt.source} has none: set "
                "options.spatial_upsampler=<ltxv-spatial-upscaler-0.9.8.safetensors or its diffusers folder>, or "
                "options.multiscale=false for one pass at the requested size"]
    if not os.path.exists(path):
        return [f"options.spatial_upsampler {path} does not exist"]
    from .upsampler import check_upsampler_file

    try:  # opened and checked now: a broken file would otherwise cost the whole first pass
        check_upsampler_file(path)
    except UserError as exc:
        return [str(exc)]
    return []


def passes(ckpt: Any, run: Any) -> list[SamplingPass]:
    o = dict(run.options)
    s = run.sampling
    (h1, w1), (h2, w2) = pass_sizes(s.height, s.width, float(o["downscale_factor"]))
    one = {**o, "multiscale": False}  # each pass is a single pass
    first = dataclasses.replace(run, sampling=dataclasses.replace(s, height=h1, width=w1), options=one)
    second_ts = o.get("second_pass_timesteps")
    steps = len(second_ts) if second_ts else int(o.get("second_pass_steps") or s.num_steps)
    second = dataclasses.replace(
        run, sampling=dataclasses.replace(s, height=h2, width=w2, num_steps=steps, initial_noise=None),
        options={**one, "timesteps": second_ts, "denoise_strength": float(o["second_pass_denoise_strength"])})
    path = find_upsampler(ckpt, o)
    if path is None:  # check_checkpoint refuses this before anything loads
        raise UserError("options.multiscale needs options.spatial_upsampler")

    def carry(latents, vae):
        from .upsampler import open_upsampler, upsample_latents

        cfg = vae.cfg  # the loaded VAE's config, latent statistics included
        return upsample_latents(open_upsampler(path), latents, latents_mean=cfg.latents_mean,
                                latents_std=cfg.latents_std, scaling_factor=float(cfg.scaling_factor),
                                adain_factor=float(o.get("adain_factor") or 0.0),
                                tone_map_compression_ratio=float(o.get("tone_map_compression_ratio") or 0.0))

    return [SamplingPass(first, name=f"pass 1/2 ({w1}x{h1})"),
            SamplingPass(second, name=f"pass 2/2 ({w2}x{h2})", carry=carry)]
