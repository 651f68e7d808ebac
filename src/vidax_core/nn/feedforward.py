"""The DiT feed-forward block (diffusers ``FeedForward``): ``proj_out(act(proj_in(x)))``, tensor-parallel.

``proj_in`` is column-parallel (its output sharded over ``mlp``), ``proj_out`` row-parallel (one all-reduce, then
its bias), so the hidden activation is never gathered. Families differ only in the hidden width, the biases, the
activation (diffusers' ``activation_fn`` names, plus ``relu2``: squared ReLU, Nemotron's MLP) and which sequence
axis the tokens carry (``seq`` for video tokens, None for a replicated text stream), which the call takes.

:class:`GatedFeedForward` is the LLM-style gated MLP ``down_proj(act(gate_proj x) * up_proj x)`` (SwiGLU with
``silu``) with the same tensor-parallel split (gate/up column-parallel, down row-parallel).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from flax import nnx

from vidax_core.nn.layers import Linear
from vidax_core.parallel.sharding import constrain

EMBED, MLP, BATCH, SEQ = "embed", "mlp", "batch", "seq"

#: diffusers ``activation_fn`` names -> the function (erf GELU, tanh GELU).
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": lambda h: jax.nn.gelu(h, approximate=False),
    "gelu-approximate": lambda h: jax.nn.gelu(h, approximate=True),
    "relu2": lambda h: jax.numpy.square(jax.nn.relu(h)),
}

#: activations of the gated MLP's gate (transformers ``hidden_act`` names).
GATE_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "silu": jax.nn.silu,
    "gelu": lambda h: jax.nn.gelu(h, approximate=False),
    "gelu_pytorch_tanh": lambda h: jax.nn.gelu(h, approximate=True),
}


class FeedForward(nnx.Module):
    """``dim -> hidden -> dim`` with ``activation`` between; parameters ``proj_in`` / ``proj_out`` in ``dtype``."""

    def __init__(self, dim: int, hidden: int, *, dtype: Any, rngs: nnx.Rngs, bias: bool = True,
                 activation: str = "gelu-approximate"):
        if activation not in ACTIVATIONS:
            raise ValueError(f"feed-forward activation {activation!r}: expected one of {sorted(ACTIVATIONS)}")
        self.activation = activation
        self.proj_in = Linear(dim, hidden, (EMBED, MLP), dtype=dtype, rngs=rngs, bias=bias)
        self.proj_out = Linear(hidden, dim, (MLP, EMBED), dtype=dtype, rngs=rngs, bias=bias)

    def __call__(self, x: jax.Array, seq: str | None = SEQ) -> jax.Array:
        """x (B, S, dim) -> (B, S, dim) in the parameter dtype; ``seq`` names the token axis (None: replicated)."""
        h = constrain(self.proj_in(x), (BATCH, seq, MLP))
        return constrain(self.proj_out(ACTIVATIONS[self.activation](h)), (BATCH, seq, EMBED))


class GatedFeedForward(nnx.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))`` (transformers' gated MLP names), parameters in ``dtype``.

    The gate activation and the product run in the projections' dtype, as the PyTorch reference computes them."""

    def __init__(self, dim: int, hidden: int, *, dtype: Any, rngs: nnx.Rngs, bias: bool = False,
                 activation: str = "silu"):
        if activation not in GATE_ACTIVATIONS:
            raise ValueError(f"gated feed-forward activation {activation!r}: expected one of "
                             f"{sorted(GATE_ACTIVATIONS)}")
        self.activation = activation
        self.gate_proj = Linear(dim, hidden, (EMBED, MLP), dtype=dtype, rngs=rngs, bias=bias)
        self.up_proj = Linear(dim, hidden, (EMBED, MLP), dtype=dtype, rngs=rngs, bias=bias)
        self.down_proj = Linear(hidden, dim, (MLP, EMBED), dtype=dtype, rngs=rngs, bias=bias)

    def __call__(self, x: jax.Array, seq: str | None = SEQ) -> jax.Array:
        """x (B, S, dim) -> (B, S, dim) in the parameter dtype; ``seq`` names the token axis (None: replicated)."""
        g = constrain(self.gate_proj(x), (BATCH, seq, MLP))
        u = constrain(self.up_proj(x), (BATCH, seq, MLP))
        return constrain(self.down_proj(GATE_ACTIVATIONS[self.activation](g) * u), (BATCH, seq, EMBED))
