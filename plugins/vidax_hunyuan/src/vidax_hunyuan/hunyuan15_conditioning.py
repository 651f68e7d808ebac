"""What the HunyuanVideo-1.5 DiT gets beside the latents and the prompt, as the pipelines build it.

The DiT takes ``2 C + 1`` channels: the noisy latents, a conditioning latent and a mask, concatenated on channels
at every model call (the sampler steps the ``C`` noisy channels only). Text-to-video feeds zeros for both (the
pipeline's ``prepare_cond_latents_and_mask``) and no SigLIP tokens (the pipeline's 729 zero tokens are masked
out by the DiT, so leaving them out gives the same video; see :mod:`vidax_hunyuan.dit15`).
"""

from __future__ import annotations

import jax.numpy as jnp

from vidax_core.model_api import Conditioning


def with_zero_condition(x, t, arrays):
    """(B, C, F, H, W) -> (B, 2C + 1, F, H, W): the noisy latents, a zero conditioning latent and a zero mask."""
    b, c = x.shape[:2]
    return jnp.concatenate([x, jnp.zeros((b, c + 1) + x.shape[2:], x.dtype)], axis=1), t


def text_to_video() -> Conditioning:
    return Conditioning(prepare=with_zero_condition)
