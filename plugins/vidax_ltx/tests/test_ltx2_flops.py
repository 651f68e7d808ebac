"""The LTX-2 DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block), for the
LTX-2.0 and the LTX-2.5 layouts."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops
from vidax_ltx.ltx2_dit import LTX2DiT, LTX2DiTConfig, audio_positions, video_positions
from vidax_ltx.ltx2_flops import dit_flops

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE_20 = dict(in_channels=128, out_channels=128, num_attention_heads=4, attention_head_dim=64,
               cross_attention_dim=256, audio_in_channels=128, audio_out_channels=128, audio_num_attention_heads=4,
               audio_attention_head_dim=32, audio_cross_attention_dim=128, num_layers=1, caption_channels=256,
               rope_type="split", use_prompt_embeddings=True)
WIDE_25 = dict(WIDE_20, rope_type="interleaved", gated_attn=True, cross_attn_mod=True, audio_gated_attn=True,
               audio_cross_attn_mod=True, use_prompt_embeddings=False, ff_bias=False)


@pytest.mark.parametrize("config", [WIDE_20, WIDE_25], ids=["ltx2.0", "ltx2.5"])
def test_flops_match_xla(config):
    cfg = LTX2DiTConfig.from_config(config)
    model = LTX2DiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, sa, text = 2, (3, 8, 12), 20, 24
    s = int(np.prod(grid))
    lat = {"video": jnp.zeros((batch, s, cfg.in_channels)), "audio": jnp.zeros((batch, sa, cfg.audio_in_channels))}
    cv = cfg.caption_channels if cfg.use_prompt_embeddings else cfg.cross_attention_dim
    ca = cfg.caption_channels if cfg.use_prompt_embeddings else cfg.audio_cross_attention_dim
    ctx = {"video": jnp.zeros((batch, text, cv)), "audio": jnp.zeros((batch, text, ca))}
    vp = jnp.broadcast_to(jnp.asarray(video_positions(cfg, grid, 24.0)), (batch, s, 3))
    ap = jnp.broadcast_to(jnp.asarray(audio_positions(cfg, sa)), (batch, sa, 1))
    check_flops(dit_flops(cfg, batch, grid, sa, text), model, lat, jnp.ones((batch,)), ctx, video_positions=vp,
                audio_positions=ap)


def test_diffusion_decoder_flops_match_its_weights_and_windows():
    """The decoder's count per unit: 2 x tokens x every linear kernel's size that unit applies (read from the
    model's own parameters), plus each stage's windowed attention at the density given (the dense pairs times it)."""
    from vidax_core.testing.tiny.ltx2 import DIFFUSION_DECODER
    from vidax_ltx.ltx2_diffusion_decoder import LTX2DiffusionDecoder, LTX2DiffusionDecoderConfig, unit_parts
    from vidax_ltx.ltx2_flops import diffusion_decoder_flops

    cfg = LTX2DiffusionDecoderConfig.from_config(DIFFUSION_DECODER)
    model = LTX2DiffusionDecoder(cfg, rngs=nnx.Rngs(0))
    latent = (2, 2, 3)
    grids = cfg.grids(*latent)
    half = lambda grid, kernel: 0.5  # noqa: E731
    got = diffusion_decoder_flops(cfg, 1, *latent, density=half).parts
    for u, grid in enumerate(grids):
        per_token = (1, 3, 4, 5) if u == 4 else range(3)  # stage 5: not the timestep embedder / shared AdaLN (0, 2)
        parts = unit_parts(model, u)
        kernels = [v for i in per_token if i < len(parts)
                   for p, v in nnx.to_flat_state(nnx.state(parts[i])) if p[-1] == "kernel"]
        s = int(np.prod(grid))
        linear = 2.0 * s * sum(int(np.prod(k.shape)) for k in kernels)
        c = cfg.decoder_stage_channels[u]
        attn = 4.0 * s * s * c * 0.5 * cfg.decoder_stage_depths[u] * (cfg.decoder_num_inference_steps if u == 4 else 1)
        name = f"stage {u + 1}"
        small = 0 if u < 4 else 2.0 * (256 * cfg.decoder_t_emb_dim + cfg.decoder_t_emb_dim ** 2
                                        + cfg.decoder_t_emb_dim * 7 * c)  # the batch-1 timestep path
        assert got[name] == pytest.approx(linear + attn + small, rel=1e-9), name
