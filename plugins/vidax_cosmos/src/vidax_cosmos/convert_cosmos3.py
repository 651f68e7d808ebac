"""diffusers ``Cosmos3OmniTransformer`` checkpoint keys -> :class:`vidax_cosmos.cosmos3_dit.Cosmos3DiT` parameters.

The diffusers layout is flat (``layers.N.*`` at the root). Keys the video DiT does not use are dropped on purpose
and listed in :data:`IGNORED`: the language-model head, the text stream's final norm (only video outputs are read),
and the sound and action heads (``audio_*``, ``action_*``) of the omni model.
"""

from __future__ import annotations

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import linear_rules, norm_rules
from vidax_core.io.load import dit_loader

from .cosmos3_dit import Cosmos3DiT, Cosmos3DiTConfig

_L = r"layers\.(\d+)\."

IGNORED = (r"lm_head\.weight", r"norm\.weight", r"audio_.*", r"action_.*")


def _mlp_rules(cfg: Cosmos3DiTConfig, src: str, dst: str) -> list[KeyRule]:
    if cfg.hidden_act == "relu2":  # core FeedForward: up -> proj_in, down -> proj_out
        names = {"up_proj": "proj_in", "down_proj": "proj_out"}
    else:
        names = {n: n for n in ("gate_proj", "up_proj", "down_proj")}
    rules: list[KeyRule] = []
    for s, d in names.items():
        rules += linear_rules(rf"{_L}{src}\.{s}", f"blocks/{dst}/{d}", 1, bias=False)
    return rules


def dit_rules(cfg: Cosmos3DiTConfig) -> list[KeyRule]:
    """The key table for ``cfg`` (the MLP and q/k-norm keys depend on ``hidden_act`` and the norm flags)."""
    rules = [KeyRule(r"embed_tokens\.weight", "embed_tokens"),
             *linear_rules(r"proj_in", "proj_in"), *linear_rules(r"proj_out", "proj_out"),
             *linear_rules(r"time_embedder\.linear_1", "time_embedder/linear_1"),
             *linear_rules(r"time_embedder\.linear_2", "time_embedder/linear_2"),
             *norm_rules(r"norm_moe_gen", "norm_moe_gen", bias=False)]
    for proj in ("to_q", "to_k", "to_v", "to_out", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"):
        rules += linear_rules(rf"{_L}self_attn\.{proj}", f"blocks/self_attn/{proj}", 1, bias=cfg.attention_bias)
    norms = ["norm_added_q", "norm_added_k"]
    if cfg.qk_norm_for_text:
        norms += ["norm_q", "norm_k"]
    if cfg.has_k_norm_und_for_gen:
        norms.append("k_norm_und_for_gen")
    for n in norms:
        rules += norm_rules(rf"{_L}self_attn\.{n}", f"blocks/self_attn/{n}", 1, bias=False)
    for n in ("input_layernorm", "input_layernorm_moe_gen", "post_attention_layernorm",
              "post_attention_layernorm_moe_gen"):
        rules += norm_rules(rf"{_L}{n}", f"blocks/{n}", 1, bias=False)
    rules += _mlp_rules(cfg, "mlp", "mlp") + _mlp_rules(cfg, "mlp_moe_gen", "mlp_moe_gen")
    return rules


load_cosmos3_dit = dit_loader(Cosmos3DiT, dit_rules, component="Cosmos3 DiT (transformer)", ignore=IGNORED,
                              name="load_cosmos3_dit")
