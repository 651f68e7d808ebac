"""Per-device activation bytes of one transformer block, estimated from the abstract parameter tree (``vidax run
--dry-run``), for any family.

The widths come from the block groups' logical axes, so no family has to describe itself: the model width is the
``embed`` size most parameters carry (a modulation projection may label its ``n x width`` output ``embed`` too),
the widest ``heads`` axis the attention width (q, k, v and the output projection), the widest ``mlp`` axis the
feed-forward hidden width. During one block a device holds, besides the weights:

* the fp32 residual stream, into and out of the block: ``2 x b x (S / sp + L) x D x 4`` bytes;
* then the larger of the attention phase, where DeepSpeed-Ulysses gives each device the whole sequence with
  ``1 / (tp x sp)`` of the heads (q, k, v and the output): ``4 x b x (S + L) x A / (tp x sp)`` elements, and the MLP
  phase (hidden before and after the activation): ``2 x b x S / sp x M / tp`` elements, in the compute dtype.

``b`` is the model batch (guidance branches) per ``dp`` group, ``S`` the video tokens, ``L`` the text tokens
(``sampling.max_sequence_length``; joint-attention models carry them in the sequence, cross-attention models as
the context). Flash-style attention kernels add only O(S) statistics; a dense attention kernel would add
``b x heads x S x S`` logits, which vidax never falls back to silently. This is an estimate of the live
intermediates, not a measurement: XLA may fuse some of them away or keep a few more.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class BlockWidths:
    model: int
    attention: int
    mlp: int


def block_widths(abstract_state: Any, groups: Iterable[str]) -> BlockWidths | None:
    """The widths of the stacked block groups ``groups`` (None when no parameter names an ``embed`` axis)."""
    from flax import nnx

    from vidax_core.nn.state import leaf_value
    from vidax_core.parallel.sharding import param_names

    groups = set(groups)
    shapes = {tuple(p): leaf_value(v).shape for p, v in nnx.to_flat_state(abstract_state)}
    widths = {"heads": 0, "mlp": 0}
    embed: Counter[int] = Counter()
    for path, names in param_names(abstract_state).items():
        if not names or (groups and str(path[0]) not in groups):
            continue
        shape = shapes[path]
        for axis, name in enumerate(names):
            if axis >= len(shape):
                continue
            if name == "embed":
                embed[int(shape[axis])] += 1
            elif name in widths:
                widths[name] = max(widths[name], int(shape[axis]))
    if not embed:
        return None
    model = max(embed, key=lambda size: (embed[size], size))
    return BlockWidths(model, widths["heads"] or model, widths["mlp"])


def block_activation_bytes(w: BlockWidths, *, batch: int, tokens: int, text_tokens: int, dp: int, tp: int, sp: int,
                           compute_bytes: int) -> int:
    """The estimate described in the module docstring, in bytes per device."""
    b = math.ceil(batch / dp)
    local = math.ceil(tokens / sp)
    residual = 2 * b * (local + text_tokens) * w.model * 4
    attention = 4 * b * (tokens + text_tokens) * math.ceil(w.attention / (tp * sp)) * compute_bytes
    mlp = 2 * b * local * math.ceil(w.mlp / tp) * compute_bytes
    return residual + max(attention, mlp)


def estimate(build: Any, abstract_state: Any, *, batch: int, tokens: int, text_tokens: int, dp: int = 1, tp: int = 1,
             sp: int = 1) -> tuple[BlockWidths | None, int]:
    """A denoiser build's block widths and :func:`block_activation_bytes` in its parameter dtype (None, 0 when its
    parameters name no ``embed`` axis): the dry run's ``activations:`` line, and what ``vidax bench --random-dit``
    holds against XLA's own temporary bytes."""
    import numpy as np

    widths = block_widths(abstract_state, (build.block_counts or {}).keys())
    if widths is None:
        return None, 0
    return widths, block_activation_bytes(widths, batch=batch, tokens=tokens, text_tokens=text_tokens, dp=dp, tp=tp,
                                          sp=sp, compute_bytes=np.dtype(build.param_dtype).itemsize)
