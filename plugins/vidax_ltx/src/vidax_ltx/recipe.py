"""Which of LTX-Video's pipelines a run follows, and that pipeline's sampling plan.

``options.pipeline``: ``condition`` is diffusers' LTXConditionPipeline (the presets; unpacked latents), ``ltx`` is
LTXPipeline / LTXImageToVideoPipeline (packed latents, the checkpoint's dynamic shift from the token count).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def uses_condition_pipeline(run) -> bool:
    return run.options.get("pipeline", "condition") == "condition"


def sampling_plan(run, sampler, latent_shape) -> dict[str, Any]:
    """LTXPipeline: sigmas ``linspace(1, 1/N, N)`` and ``mu`` from the video token count. LTXConditionPipeline:
    timesteps ``linear_quadratic_schedule(N) * 1000`` and no ``mu``, entered at ``options.denoise_strength``. Either
    with ``options.timesteps``: those timesteps (``FlowMatchEulerDiscreteScheduler.set_timesteps(timesteps=...)``)."""
    from vidax_core.errors import UserError
    from vidax_core.schedulers.base import calculate_shift

    kwargs: dict[str, Any] = {}
    timesteps = run.options.get("timesteps")
    n = int(run.sampling.num_steps)
    flow = getattr(sampler, "name", "") == "flow_euler"
    if uses_condition_pipeline(run):
        if getattr(sampler, "use_dynamic_shifting", False):
            raise UserError("the scheduler asks for a resolution-dependent shift (use_dynamic_shifting), which "
                            "LTXConditionPipeline does not apply (the 0.9.7 / 0.9.8 diffusers repositories set it "
                            "false): set options.pipeline=ltx options.multiscale=false for LTXPipeline, or "
                            "sampling.scheduler={name: flow_euler}")
        if timesteps:
            kwargs["timesteps"] = [float(t) for t in timesteps]
        elif flow:
            from .condition import linear_quadratic_timesteps

            kwargs["timesteps"] = linear_quadratic_timesteps(n)
        strength = float(run.options.get("denoise_strength", 1.0))
        if strength < 1.0:
            kwargs["denoise_strength"] = strength
        return kwargs
    if getattr(sampler, "use_dynamic_shifting", False):
        f, h, w = latent_shape
        kwargs["mu"] = calculate_shift(f * h * w, sampler.base_image_seq_len, sampler.max_image_seq_len,
                                       sampler.base_shift, sampler.max_shift)
    if timesteps:
        kwargs["timesteps"] = [float(t) for t in timesteps]
        return kwargs
    if flow:
        kwargs["sigmas"] = np.linspace(1.0, 1.0 / n, n)
    return kwargs


def vae_factors(config: dict) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLLTXVideo`` config, as the VAE module resolves them."""
    from .vae import LTXVAEConfig

    cfg = LTXVAEConfig.from_config(config)
    return int(cfg.temporal_compression_ratio), int(cfg.spatial_compression_ratio)


def load_vae(ckpt, run):
    """The VAE with the run's decode settings (timestep, noise scale, seed); its encoder only when the run
    encodes an image, clip or conditioning item."""
    from vidax_core.model_api import vae_encodes

    from . import vae as vae_lib
    from .autoencoder import DecodeSettings, LTXVideoAutoencoder, latent_grid

    raw = ckpt.config("vae")
    cfg = vae_lib.LTXVAEConfig.from_config(raw)
    with_encoder = vae_encodes(run) and (uses_condition_pipeline(run) or run.sampling.initial_noise is None)
    model = vae_lib.load_vae(cfg, ckpt.tensors("vae"), with_encoder=with_encoder)
    t, sp = vae_factors(raw)
    s = run.sampling
    return LTXVideoAutoencoder(model, cfg, latent_grid(s.num_frames, s.height, s.width, t, sp), DecodeSettings.of(run))
