"""The core feed-forward block (vidax_core.nn.feedforward) against diffusers' ``FeedForward`` with every parameter
randomised, loaded through the core key rules (vidax_core.io.diffusers_rules) and loader (vidax_core.io.load).

Tolerance: the reference's own fp32-vs-fp64 noise (plus one fp32 ulp of the output's scale).
"""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.diffusers_rules import feedforward_rules
from vidax_core.io.load import load_model
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.state import flat_state

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

EPS32 = float(np.finfo(np.float32).eps)
D, HIDDEN = 16, 40


def _reference(activation: str, bias: bool, seed: int):
    from diffusers.models.attention import FeedForward as Ref

    ref = Ref(D, inner_dim=HIDDEN, activation_fn=activation, bias=bias)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return ref


def _load(ref, activation: str, bias: bool) -> FeedForward:
    tensors = {f"ff.{k}": v.detach().numpy() for k, v in ref.state_dict().items()}
    return load_model(lambda: FeedForward(D, HIDDEN, dtype=np.float32, rngs=nnx.Rngs(0), bias=bias,
                                          activation=activation),
                      tensors, feedforward_rules(r"ff", ""), component="ff")


@pytest.mark.parametrize("activation,bias", [("gelu", True), ("gelu-approximate", True), ("gelu", False)])
def test_matches_diffusers_feedforward(activation, bias):
    ref = _reference(activation, bias, seed=1)
    ours = _load(ref, activation, bias)
    x = np.random.default_rng(2).standard_normal((2, 7, D)).astype(np.float32)
    with torch.no_grad():
        r32 = ref(torch.from_numpy(x)).numpy()
        r64 = copy.deepcopy(ref).double()(torch.from_numpy(x).double()).numpy()
    with jax.default_matmul_precision("highest"):
        got = np.asarray(ours(x), np.float64)
    noise = np.abs(r32 - r64).max()
    err = np.abs(got - r64).max()
    print(f"feedforward {activation} bias={bias}: max_abs={err:.3e} (reference fp32 vs fp64 {noise:.3e})")
    assert err <= 4 * noise + EPS32 * np.abs(r64).max(), (err, noise)


def test_the_two_gelus_differ():
    """The activation name is not ignored: erf and tanh GELU give measurably different outputs."""
    ref = _reference("gelu", True, seed=3)
    x = np.random.default_rng(4).standard_normal((1, 5, D)).astype(np.float32) * 3
    a = np.asarray(_load(ref, "gelu", True)(x))
    b = np.asarray(_load(ref, "gelu-approximate", True)(x))
    assert np.abs(a - b).max() > 1e-4


def test_parameter_tree_and_logical_axes():
    ff = nnx.eval_shape(lambda: FeedForward(D, HIDDEN, dtype=np.float32, rngs=nnx.Rngs(0), bias=False))
    flat = flat_state(ff)
    assert {k: v.shape for k, v in flat.items()} == {("proj_in", "kernel"): (D, HIDDEN),
                                                     ("proj_out", "kernel"): (HIDDEN, D)}
    names = {tuple(p): v.get_metadata().get("out_sharding") for p, v in nnx.to_flat_state(nnx.state(ff))}
    assert names == {("proj_in", "kernel"): ("embed", "mlp"), ("proj_out", "kernel"): ("mlp", "embed")}


def test_unknown_activation_and_unexpected_bias_are_refused():
    with pytest.raises(ValueError, match="activation"):
        FeedForward(D, HIDDEN, dtype=np.float32, rngs=nnx.Rngs(0), activation="swiglu")
    ref = _reference("gelu", True, seed=5)
    with pytest.raises(UserError, match="bias"):
        _load(ref, "gelu", bias=False)  # the checkpoint's biases have nowhere to go


@pytest.mark.parametrize("act", ["silu", "relu2"])
def test_gated_and_relu2_mlps_match_diffusers_cosmos3_mlp(act):
    """``GatedFeedForward`` (SwiGLU) and ``FeedForward(activation="relu2")`` against diffusers' Cosmos3 MLP
    (``gate_proj``/``up_proj``/``down_proj``; relu^2 has no gate), every weight randomised."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3VLTextMLP

    from vidax_core.io.convert import KeyRule, linear
    from vidax_core.nn.feedforward import GatedFeedForward

    ref = Cosmos3VLTextMLP(D, HIDDEN, hidden_act=act)
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    tensors = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    if act == "silu":
        make = lambda: GatedFeedForward(D, HIDDEN, dtype=np.float32, rngs=nnx.Rngs(0))  # noqa: E731
        rules = [KeyRule(rf"({n})\.weight", "{1}/kernel", linear) for n in ("gate_proj", "up_proj", "down_proj")]
    else:
        make = lambda: FeedForward(D, HIDDEN, dtype=np.float32, rngs=nnx.Rngs(0), bias=False,  # noqa: E731
                                   activation="relu2")
        rules = [KeyRule(r"up_proj\.weight", "proj_in/kernel", linear),
                 KeyRule(r"down_proj\.weight", "proj_out/kernel", linear)]
    ours = load_model(make, tensors, rules, component="mlp")
    x = np.random.default_rng(7).standard_normal((2, 5, D)).astype(np.float32)
    with torch.no_grad():
        r32 = ref(torch.from_numpy(x)).numpy()
        r64 = copy.deepcopy(ref).double()(torch.from_numpy(x).double()).numpy()
    with jax.default_matmul_precision("highest"):
        got = np.asarray(ours(x), np.float64)
    noise, err = np.abs(r32 - r64).max(), np.abs(got - r64).max()
    print(f"mlp {act}: max_abs={err:.3e} (reference fp32 vs fp64 {noise:.3e})")
    assert err <= 4 * noise + EPS32 * np.abs(r64).max(), (err, noise)
