"""FLOPs of a denoiser call, counted from its shapes: the numerator of MFU.

A multiply-add counts as 2 FLOPs (the convention of XLA's cost analysis and of every MFU figure). Only the
matmuls are counted: the linear layers and the two products of attention (q k^T and p v) at the real query and
key lengths, padding included (that is the work the hardware does). Norms, softmax, RoPE and activations are a
few FLOPs per element against thousands per token in the matmuls; at real widths they are well under 1%.

A family states its count in ONE small function (``vidax_<family>.flops``) built from these pieces and hands it
to the core as :attr:`vidax_core.model_api.DitBuild.flops`: ``flops(batch, grid, text_tokens) -> float`` for one
model call, ``grid`` the latent grid (f, h, w) before patching and ``text_tokens`` the prompt length
(optional ``blocks={group: n}``: n blocks of a stacked group instead of the config's count).

Sparse attention (NABLA's block masks, 3-D neighbourhoods) counts the work its kernel computes: a family whose DiT
runs one takes ``sparse={kind: density}`` (the share of the dense pairs its kernel's tiles cover, measured per call
site: :func:`vidax_core.attention.sparsity.densities`) and multiplies that attention's dense count by it
(:func:`sparse_attention`); without ``sparse`` the count is the dense equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence


def linear(tokens: float, d_in: int, d_out: int) -> float:
    """One dense layer applied to ``tokens`` rows: ``2 * tokens * d_in * d_out``."""
    return 2.0 * tokens * d_in * d_out


def attention(batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, v_dim: int | None = None) -> float:
    """The two attention matmuls, q k^T and softmax(.) v, for ``batch`` x ``heads`` heads."""
    v_dim = head_dim if v_dim is None else v_dim
    return 2.0 * batch * heads * q_len * kv_len * (head_dim + v_dim)


def sparse_attention(kind: str, sparse: dict[str, float] | None, batch: int, heads: int, q_len: int, kv_len: int,
                     head_dim: int, v_dim: int | None = None) -> float:
    """:func:`attention` of a sparse kind (``"nabla"``, ``"neighborhood"``) times its measured density in ``sparse``
    (the dense equivalent when ``sparse`` does not name the kind)."""
    return attention(batch, heads, q_len, kv_len, head_dim, v_dim) * float((sparse or {}).get(kind, 1.0))


def tokens(grid: Sequence[int], patch: Sequence[int]) -> int:
    """Video tokens of a latent grid (f, h, w) patched by (pt, ph, pw)."""
    (f, h, w), (pt, ph, pw) = grid, patch
    return (int(f) // int(pt)) * (int(h) // int(ph)) * (int(w) // int(pw))


@dataclass
class Tally:
    """A FLOP count by part (``embed``, one entry per block group, ``head``), so a report can say where they go."""

    parts: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, flops: float, times: int = 1) -> "Tally":
        self.parts[name] = self.parts.get(name, 0.0) + float(flops) * times
        return self

    @property
    def total(self) -> float:
        return float(sum(self.parts.values()))


def context_tokens(context: Any) -> int:
    """The prompt length of a text context as the step hands it to the denoiser: an array (B, L, D) or a dict
    holding one under ``hidden`` (masked and pooled extras do not count)."""
    hidden = context.get("hidden") if isinstance(context, dict) else context
    if hidden is None:
        import jax

        hidden = jax.tree.leaves(context)[0]
    shape = getattr(hidden, "shape", ())
    return int(shape[1]) if len(shape) >= 2 else 0


def step_flops(build: Any, batches: Iterable[Sequence[Any]], grid: Sequence[int], text_tokens: int,
               blocks: dict[str, int] | None = None, sparse: dict[str, float] | None = None) -> float | None:
    """FLOPs of one denoising step: every model call of it (``batches``: one tuple of guidance branches per call,
    its batch the tuple's length; ``blocks``: a cut depth per stacked group; ``sparse``: the measured density per
    sparse attention kind, else the dense equivalent). None when the build states none."""
    if build.flops is None:
        return None
    g = tuple(int(v) for v in grid)
    kw: dict[str, Any] = {"blocks": blocks} if blocks else {}
    if sparse and _takes(build.flops, "sparse"):  # a counter without sparse kinds counts dense attention only
        kw["sparse"] = sparse
    return float(sum(build.flops(len(b), g, int(text_tokens), **kw) for b in batches))


def _takes(fn: Any, name: str) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def human(n: float) -> str:
    """``13.0 PFLOP``, ``3.5 MFLOP``: a FLOP count in the largest unit under it."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} FLOP"
