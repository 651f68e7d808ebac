"""Key table of diffusers' ``Kandinsky6Transformer3DModel`` onto :class:`vidax_kandinsky.k6_dit.Kandinsky6DiT`.

The module tree follows diffusers' with the core blocks' parameter names: an attention's ``to_query`` /
``to_key`` / ``to_value`` / ``out_layer`` / ``query_norm`` / ``key_norm`` land on ``to_q`` / ``to_k`` / ``to_v`` /
``to_out`` / ``norm_q`` / ``norm_k``; a feed-forward's ``net.0.proj`` / ``net.2`` on ``proj_in`` / ``proj_out``; a
time embedding's ``timestep_embedder.linear_1`` / ``linear_2`` on ``linear_1`` / ``linear_2``; the heads'
``out_layer.modulation`` / ``audio_out_layer.modulation`` on ``out_modulation`` / ``audio_out_modulation``. The
three block stacks are ``video_text_blocks``, ``audio_text_blocks`` and ``visual_blocks`` (layer index = regex
group 1). The RoPE tables are buffers diffusers does not save.
"""

from __future__ import annotations

from vidax_core import KeyRule, feedforward_rules, linear_rules

from .convert_dit import attention_rules as _attention, embedding_rules as _embedding

_BLOCK = r"visual_transformer_blocks\.(\d+)\."


def _stream(stream: str) -> list[KeyRule]:
    """One stream's embeddings and text branch."""
    text = rf"{stream}_text_transformer_blocks\.(\d+)\."
    dst = f"{stream}_text_blocks"
    return [
        *linear_rules(rf"{stream}_time_embeddings\.timestep_embedder\.linear_1", f"{stream}_time_embeddings/linear_1"),
        *linear_rules(rf"{stream}_time_embeddings\.timestep_embedder\.linear_2", f"{stream}_time_embeddings/linear_2"),
        *_embedding(f"{stream}_text_embeddings"),
        *_embedding(f"{stream}_pooled_text_embeddings"),
        *linear_rules(text + r"text_modulation\.out_layer", f"{dst}/text_modulation", 1),
        *_attention(text + r"attn\.", f"{dst}/attn"),
        *feedforward_rules(text + "feed_forward", f"{dst}/feed_forward", 1, bias=False),
    ]


def _decoder(part: str) -> list[KeyRule]:
    src, dst = rf"{_BLOCK}{part}\.", f"visual_blocks/{part}"
    return [
        *linear_rules(src + r"visual_modulation\.out_layer", f"{dst}/visual_modulation", 1),
        *_attention(src + r"self_attention\.", f"{dst}/self_attention"),
        *_attention(src + r"cross_attention\.", f"{dst}/cross_attention"),
        *feedforward_rules(src + "feed_forward", f"{dst}/feed_forward", 1, bias=False),
    ]


K6_DIT_RULES: list[KeyRule] = [
    *_stream("video"),
    *_stream("audio"),
    *linear_rules(r"visual_embeddings\.in_layer", "visual_embeddings"),
    KeyRule(r"visual_token_type_embeddings\.weight", "visual_token_type_embeddings"),
    *_embedding("audio_embeddings"),
    *_decoder("video_dec_block"),
    *_decoder("audio_dec_block"),
    *_attention(_BLOCK + r"va_cross_attention\.", "visual_blocks/va_cross_attention"),
    *_attention(_BLOCK + r"av_cross_attention\.", "visual_blocks/av_cross_attention"),
    *linear_rules(_BLOCK + r"va_modulation\.out_layer", "visual_blocks/va_modulation", 1),
    *linear_rules(_BLOCK + r"av_modulation\.out_layer", "visual_blocks/av_modulation", 1),
    *linear_rules(r"out_layer\.modulation\.out_layer", "out_modulation"),
    *linear_rules(r"out_layer\.out_layer", "out_layer"),
    *linear_rules(r"audio_out_layer\.modulation\.out_layer", "audio_out_modulation"),
    *linear_rules(r"audio_out_layer\.out_layer", "audio_out_layer"),
]

_SR_BLOCK = r"visual_transformer_blocks\.(\d+)\."

# ``Kandinsky6SRTransformer3DModel`` onto :class:`vidax_kandinsky.k6sr_dit.Kandinsky6SRDiT`: one block stack
# (``visual_blocks``), ``pooled_bias`` as it is; its norms are affine-free and its RoPE tables unsaved buffers.
K6SR_DIT_RULES: list[KeyRule] = [
    *linear_rules(r"time_embeddings\.timestep_embedder\.linear_1", "time_embeddings/linear_1"),
    *linear_rules(r"time_embeddings\.timestep_embedder\.linear_2", "time_embeddings/linear_2"),
    KeyRule(r"pooled_bias", "pooled_bias"),
    *linear_rules(r"visual_embeddings\.in_layer", "visual_embeddings"),
    *linear_rules(_SR_BLOCK + r"visual_modulation\.out_layer", "visual_blocks/visual_modulation", 1),
    *_attention(_SR_BLOCK + r"self_attention\.", "visual_blocks/self_attention"),
    *feedforward_rules(_SR_BLOCK + "feed_forward", "visual_blocks/feed_forward", 1, bias=False),
    *linear_rules(r"out_layer\.modulation\.out_layer", "out_modulation"),
    *linear_rules(r"out_layer\.out_layer", "out_layer"),
]
