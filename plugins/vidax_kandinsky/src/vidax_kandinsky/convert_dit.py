"""Key table of diffusers' ``Kandinsky5Transformer3DModel`` onto :class:`vidax_kandinsky.dit.KandinskyDiT`.

The module tree follows diffusers' with the core blocks' parameter names: an attention's ``to_query`` /
``to_key`` / ``to_value`` / ``out_layer`` / ``query_norm`` / ``key_norm`` land on ``to_q`` / ``to_k`` / ``to_v`` /
``to_out`` / ``norm_q`` / ``norm_k``, a feed-forward's ``in_layer`` / ``out_layer`` on ``proj_in`` / ``proj_out``,
the time embedder's ``in_layer`` / ``out_layer`` on ``linear_1`` / ``linear_2``; the two block stacks are
``text_blocks`` and ``visual_blocks`` (layer index = regex group 1). The RoPE tables are buffers diffusers does not
save. LoRA files in diffusers' (peft) layout name these same modules (``transformer.visual_transformer_blocks.0.
self_attention.to_query``), so they land on the checkpoint's tensors as they are.
"""

from __future__ import annotations

from vidax_core import KeyRule, linear_rules, norm_rules

_TEXT = r"text_transformer_blocks\.(\d+)\."
_VISUAL = r"visual_transformer_blocks\.(\d+)\."


def attention_rules(src: str, dst: str) -> list[KeyRule]:
    """A Kandinsky attention (``to_query`` ... ``key_norm``, both generations) onto the core block's names."""
    rules: list[KeyRule] = []
    for theirs, ours in (("to_query", "to_q"), ("to_key", "to_k"), ("to_value", "to_v"), ("out_layer", "to_out")):
        rules += linear_rules(src + theirs, f"{dst}/{ours}", 1)
    for theirs, ours in (("query_norm", "norm_q"), ("key_norm", "norm_k")):
        rules += norm_rules(src + theirs, f"{dst}/{ours}", 1, bias=False)
    return rules


def _feed_forward(src: str, dst: str) -> list[KeyRule]:
    return [*linear_rules(src + "in_layer", f"{dst}/proj_in", 1, bias=False),
            *linear_rules(src + "out_layer", f"{dst}/proj_out", 1, bias=False)]


def embedding_rules(name: str) -> list[KeyRule]:
    """A Kandinsky text/pooled embedding (Linear + affine LayerNorm)."""
    return [*linear_rules(rf"{name}\.in_layer", f"{name}/in_layer"), *norm_rules(rf"{name}\.norm", f"{name}/norm")]


DIT_RULES: list[KeyRule] = [
    *linear_rules(r"time_embeddings\.in_layer", "time_embeddings/linear_1"),
    *linear_rules(r"time_embeddings\.out_layer", "time_embeddings/linear_2"),
    *embedding_rules("text_embeddings"),
    *embedding_rules("pooled_text_embeddings"),
    *linear_rules(r"visual_embeddings\.in_layer", "visual_embeddings"),
    *linear_rules(_TEXT + r"text_modulation\.out_layer", "text_blocks/text_modulation", 1),
    *attention_rules(_TEXT + r"self_attention\.", "text_blocks/self_attention"),
    *_feed_forward(_TEXT + r"feed_forward\.", "text_blocks/feed_forward"),
    *linear_rules(_VISUAL + r"visual_modulation\.out_layer", "visual_blocks/visual_modulation", 1),
    *attention_rules(_VISUAL + r"self_attention\.", "visual_blocks/self_attention"),
    *attention_rules(_VISUAL + r"cross_attention\.", "visual_blocks/cross_attention"),
    *_feed_forward(_VISUAL + r"feed_forward\.", "visual_blocks/feed_forward"),
    *linear_rules(r"out_layer\.modulation\.out_layer", "out_modulation"),
    *linear_rules(r"out_layer\.out_layer", "out_layer"),
]
