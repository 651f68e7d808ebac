"""Tensor/sequence-parallel divisibility of the Cosmos3 DiT: query heads AND key/value heads (GQA).

Under TP the q projections are split over ``tp`` by query head and the k/v projections by key/value head; each
shard then repeats its own key/value heads to its query heads, which is the global GQA grouping only when every
shard holds whole groups: ``num_key_value_heads % tp == 0`` as well as ``num_attention_heads % tp == 0``. Under
Ulysses SP the all-to-all splits each shard's (repeated) query heads over ``sp``.
"""

from __future__ import annotations

from vidax_core.errors import UserError


def check_heads(num_attention_heads: int, num_key_value_heads: int, *, tp: int, sp: int = 1) -> None:
    """Raise :class:`UserError` naming the ``parallel.*`` key to change when the heads do not split."""
    if num_attention_heads % tp:
        raise UserError(f"parallel.tp={tp} must divide the model's {num_attention_heads} attention (query) heads: "
                        f"change parallel.tp")
    if num_key_value_heads % tp:
        raise UserError(f"parallel.tp={tp} must divide the model's {num_key_value_heads} key/value heads (GQA: "
                        f"{num_attention_heads} query heads share them): change parallel.tp to a divisor of "
                        f"{num_key_value_heads}")
    if (num_attention_heads // tp) % sp:
        raise UserError(f"parallel.sp={sp} must divide the {num_attention_heads // tp} attention heads per "
                        f"tensor-parallel shard (heads {num_attention_heads} / tp {tp}): change parallel.sp")


def check_config(cfg, *, tp: int, sp: int = 1) -> None:
    """:func:`check_heads` for a :class:`vidax_cosmos.cosmos3_dit.Cosmos3DiTConfig`."""
    check_heads(cfg.num_attention_heads, cfg.num_key_value_heads, tp=tp, sp=sp)
