"""FLOPs of one HunyuanVideo (1.0 and 1.5) DiT call from its config and shapes (:mod:`vidax_core.flops`
conventions). The two DiTs share the patch embedding, the text token refiner, the double-stream block and the
output head; the pieces below are those, and each version's count adds what is its own."""

from __future__ import annotations

import math

from vidax_core import flops as F

from .dit15 import BYT5_HIDDEN
from .hunyuan15_presets import BYT5_LENGTH, IMAGE_TOKENS


def embedder(batch: int, d_in: int, dim: int) -> float:
    """A ``TimestepEmbedding`` (two linears) on one row per sample."""
    return F.linear(batch, d_in, dim) + F.linear(batch, dim, dim)


def mlp(rows: float, dim: int, width: int) -> float:
    """An up and a down projection through ``width``."""
    return 2 * F.linear(rows, dim, width)


def patch_embed(cfg, batch: int, video: int) -> float:
    """The conv3d patch embedding (stride == kernel), a linear per video token."""
    return F.linear(batch * video, math.prod(cfg.patch) * cfg.in_channels, cfg.dim)


def refiner(cfg, batch: int, text: int) -> float:
    """The token refiner over ``text`` prompt tokens: its timestep and pooled-text embedders, the input projection
    and ``num_refiner_layers`` self-attention + MLP blocks (MLP ratio 4 whatever the config says)."""
    b, d, L = batch, cfg.dim, text
    block = (4 * F.linear(b * L, d, d) + F.attention(b, cfg.num_attention_heads, L, L, cfg.attention_head_dim)
             + mlp(b * L, d, 4 * d) + F.linear(b, d, 2 * d))
    head = embedder(b, 256, d) + embedder(b, cfg.text_embed_dim, d) + F.linear(b * L, cfg.text_embed_dim, d)
    return head + cfg.num_refiner_layers * block


def double_block(cfg, batch: int, joint: int) -> float:
    """One double-stream block over ``joint`` tokens (video + conditioning): two modulations, per-stream q/k/v/out
    and MLPs, ONE joint attention over every token, padding included."""
    b, d = batch, cfg.dim
    return (2 * F.linear(b, d, 6 * d) + 4 * F.linear(b * joint, d, d) + mlp(b * joint, d, cfg.mlp_dim)
            + F.attention(b, cfg.num_attention_heads, joint, joint, cfg.attention_head_dim))


def single_block(cfg, batch: int, joint: int) -> float:
    """One single-stream block (1.0 only): one modulation, shared q/k/v, MLP and output projections."""
    b, d = batch, cfg.dim
    return (F.linear(b, d, 3 * d) + 4 * F.linear(b * joint, d, d) + mlp(b * joint, d, cfg.mlp_dim)
            + F.attention(b, cfg.num_attention_heads, joint, joint, cfg.attention_head_dim))


def output_head(cfg, batch: int, video: int) -> float:
    """AdaLN-continuous (scale, shift) and the projection back to patch pixels."""
    return F.linear(batch, cfg.dim, 2 * cfg.dim) + F.linear(batch * video, cfg.dim,
                                                              cfg.out_channels * math.prod(cfg.patch))


def depth(blocks: dict | None, group: str, default: int) -> int:
    """Blocks counted in ``group``: the cut depth ``blocks[group]`` when given, else the config's."""
    return (blocks or {}).get(group, default)


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """HunyuanVideo 1.0: patch embedding, the text token refiner, time / pooled-text / guidance embedders,
    ``num_layers`` double-stream blocks and ``num_single_layers`` single-stream blocks (each ONE joint attention
    over [text; video], padded text included), output head."""
    b, d = batch, cfg.dim
    s = F.tokens(grid, cfg.patch)
    n = s + text_tokens
    t = F.Tally()
    t.add("embed", patch_embed(cfg, b, s) + embedder(b, 256, d) + embedder(b, cfg.pooled_projection_dim, d)
          + (embedder(b, 256, d) if cfg.guidance_embeds else 0))
    t.add("refiner", refiner(cfg, b, text_tokens))
    t.add("double_blocks", double_block(cfg, b, n), depth(blocks, "double_blocks", cfg.num_layers))
    t.add("single_blocks", single_block(cfg, b, n), depth(blocks, "single_blocks", cfg.num_single_layers))
    t.add("head", output_head(cfg, b, s))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a HunyuanVideo DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)


def image_tokens15(cfg) -> int:
    """SigLIP tokens of a 1.5 call: the published 729 (384 px / patch 14) for an image-to-video config
    (``task_type``, which the plugin's checks tie to the model id), none for text-to-video (its DiT call leaves
    them out)."""
    return IMAGE_TOKENS if cfg.task_type == "i2v" else 0


def byt5_projection(cfg, rows: int) -> float:
    """The byT5 projection's three linears (through its fixed 2048 width) on ``rows`` tokens."""
    h = BYT5_HIDDEN
    return F.linear(rows, cfg.text_embed_2_dim, h) + F.linear(rows, h, h) + F.linear(rows, h, cfg.dim)


def image_projection(cfg, rows: int) -> float:
    """The SigLIP image projection's two linears on ``rows`` tokens."""
    return F.linear(rows, cfg.image_embed_dim, cfg.image_embed_dim) + F.linear(rows, cfg.image_embed_dim, cfg.dim)


def dit15_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None, *,
                byt5_tokens: int = BYT5_LENGTH, image_tokens: int | None = None) -> float:
    """HunyuanVideo-1.5: patch embedding, timestep embedder (and ``timestep_r``'s with ``use_meanflow``: the
    step-distilled DiT gets it at every call), the token refiner on the ``text_tokens`` Qwen tokens, the byT5 and
    SigLIP projections, ``num_layers`` double-stream blocks whose joint attention runs over video + Qwen + byT5 +
    image tokens (padding included), output head.

    The call's byT5 and image lengths are not in the core's signature: ``byt5_tokens`` defaults to the family's
    256 (``options.tokenizer_2_max_length``'s default, the length the plugin's example inputs use; a run that
    sets another length is still counted at 256) and ``image_tokens`` to :func:`image_tokens15`."""
    b, d = batch, cfg.dim
    images = image_tokens15(cfg) if image_tokens is None else image_tokens
    s = F.tokens(grid, cfg.patch)
    n = s + text_tokens + byt5_tokens + images
    t = F.Tally()
    t.add("embed", patch_embed(cfg, b, s) + embedder(b, 256, d) * (2 if cfg.use_meanflow else 1))
    t.add("refiner", refiner(cfg, b, text_tokens))
    t.add("byt5", byt5_projection(cfg, b * byt5_tokens))
    t.add("image", image_projection(cfg, b * images))
    t.add("double_blocks", double_block(cfg, b, n), depth(blocks, "double_blocks", cfg.num_layers))
    t.add("head", output_head(cfg, b, s))
    return t.total


def counter15(cfg, **lengths):
    """``DitBuild.flops`` of a HunyuanVideo-1.5 DiT with config ``cfg`` (``lengths``: ``byt5_tokens`` /
    ``image_tokens`` of :func:`dit15_flops`, defaults when not given)."""
    return lambda batch, grid, text_tokens, blocks=None: dit15_flops(cfg, batch, grid, text_tokens, blocks,
                                                                     **lengths)
