"""FLOPs of one LTX-2.x DiT call from its config and shapes (:mod:`vidax_core.flops` conventions): both streams."""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core import flops as F


def _adaln(tokens: int, d: int, n: int) -> float:
    """An AdaLN-single: the 256-channel timestep MLP and its ``n * d`` modulation."""
    return F.linear(tokens, 256, d) + F.linear(tokens, d, d) + F.linear(tokens, d, n * d)


def _attention(q_tokens: int, kv_tokens: int, q_dim: int, kv_dim: int, heads: int, head_dim: int, b: int,
               gated: bool) -> float:
    inner = heads * head_dim
    f = (F.linear(b * q_tokens, q_dim, inner) + 2 * F.linear(b * kv_tokens, kv_dim, inner)
         + F.attention(b, heads, q_tokens, kv_tokens, head_dim) + F.linear(b * q_tokens, inner, q_dim))
    return f + (F.linear(b * q_tokens, q_dim, heads) if gated else 0.0)


def dit_flops(cfg, batch: int, grid, audio_tokens: int, text_tokens: int, blocks: dict | None = None) -> float:
    """Projections in, AdaLN-single embedders, caption projections (LTX-2.0), ``num_layers`` x (video and audio
    self-attention, cross-attention to their text, audio-to-video and video-to-audio attention, both FFNs), heads."""
    b, L, sa = batch, text_tokens, audio_tokens
    s = F.tokens(grid, (cfg.patch_size_t, cfg.patch_size, cfg.patch_size))
    d, da = cfg.dim, cfg.audio_dim
    h, hd, ha, hda = (cfg.num_attention_heads, cfg.attention_head_dim, cfg.audio_num_attention_heads,
                      cfg.audio_attention_head_dim)
    vg, ag = cfg.gated_attn, cfg.audio_gated_attn
    t = F.Tally()
    t.add("embed", F.linear(b * s, cfg.in_channels, d) + F.linear(b * sa, cfg.audio_in_channels, da))
    t.add("embed", _adaln(b, d, 9 if cfg.cross_attn_mod else 6) + _adaln(b, da, 9 if cfg.audio_cross_attn_mod else 6)
          + _adaln(b, d, 4) + _adaln(b, da, 4) + _adaln(b, d, 1) + _adaln(b, da, 1))
    if cfg.prompt_modulation and cfg.use_prompt_adaln_single:
        t.add("embed", _adaln(b, d, 2) + _adaln(b, da, 2))
    if cfg.use_prompt_embeddings:
        t.add("embed", F.linear(b * L, cfg.caption_channels, d) + F.linear(b * L, d, d)
              + F.linear(b * L, cfg.caption_channels, da) + F.linear(b * L, da, da))
    block = (_attention(s, s, d, d, h, hd, b, vg) + _attention(sa, sa, da, da, ha, hda, b, ag)
             + _attention(s, L, d, cfg.cross_attention_dim, h, hd, b, vg)
             + _attention(sa, L, da, cfg.audio_cross_attention_dim, ha, hda, b, ag)
             + _attention(s, sa, d, da, ha, hda, b, vg) + _attention(sa, s, da, d, ha, hda, b, ag)
             + 2 * F.linear(b * s, d, 4 * d) + 2 * F.linear(b * sa, da, 4 * da))
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b * s, d, cfg.out_channels) + F.linear(b * sa, da, cfg.audio_out_channels))
    return t.total


def counter(cfg, latent_shapes):
    """``DitBuild.flops`` of an LTX-2 DiT with config ``cfg``; the audio length comes from the build's
    ``latent_shapes`` at the video grid."""

    def flops(batch, grid, text_tokens, blocks=None):
        audio_tokens = latent_shapes(1, grid)["audio"][2]
        return dit_flops(cfg, batch, grid, audio_tokens, text_tokens, blocks)

    return flops


def diffusion_decoder_flops(cfg, batch: int, frames: int, height: int, width: int,
                            density: Any = None) -> F.Tally:
    """The LTX-2.x diffusion video decoder's FLOPs by unit (``stage 1`` .. ``stage 4``, ``stage 5``: all its steps)
    for latents of ``frames x height x width``: per block the q/k/v/out projections, the windowed attention and
    the gated MLP, the upsamplers, ``conv_in``, stage 5's context projections, pixel projections and AdaLN.
    ``density(grid, kernel)``: the share of the dense (Sq x Sk) attention pairs the kernel computes at that stage
    (:func:`vidax_core.attention.neighborhood.computed_density`; None: the dense equivalent)."""
    from vidax_ltx.ltx2_diffusion_decoder import mlp_hidden

    b, hd = batch, cfg.decoder_head_dim
    grids = cfg.grids(frames, height, width)
    ch = cfg.decoder_stage_channels
    kernels = (*cfg.decoder_stage_kernels, cfg.decoder_stage5_kernel)

    def block(s: int, c: int, grid, kernel) -> float:
        share = 1.0 if density is None else float(density(grid, kernel))
        return (4 * F.linear(b * s, c, c) + F.attention(b, c // hd, s, s, hd) * share
                + 2 * F.linear(b * s, c, mlp_hidden(c)) + F.linear(b * s, mlp_hidden(c), c))

    t = F.Tally()
    for i, (grid, stride, red) in enumerate(zip(grids, cfg.decoder_upsample_strides,
                                                cfg.decoder_upsample_channel_reductions)):
        s = int(np.prod(grid))
        name = f"stage {i + 1}"
        if i == 0:
            t.add(name, F.linear(b * s, cfg.latent_channels, ch[0]))
        t.add(name, block(s, ch[i], grid, kernels[i]), cfg.decoder_stage_depths[i])
        t.add(name, F.linear(b * s, ch[i], int(np.prod(stride)) * ch[i] // red))
    s5, c5, pixels = int(np.prod(grids[-1])), ch[-1], cfg.out_channels * cfg.patch_size**2
    step = (F.linear(b, 256, cfg.decoder_t_emb_dim) + F.linear(b, cfg.decoder_t_emb_dim, cfg.decoder_t_emb_dim)
            + F.linear(b, cfg.decoder_t_emb_dim, 7 * c5) + F.linear(b * s5, pixels, c5)
            + F.linear(b * s5, c5, pixels))
    step += cfg.decoder_stage_depths[-1] * (F.linear(b * s5, c5, c5) + block(s5, c5, grids[-1], kernels[-1]))
    t.add("stage 5", step, cfg.decoder_num_inference_steps)
    return t
