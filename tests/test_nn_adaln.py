"""Core AdaLN variants (vidax_core.nn.adaln) against diffusers' modules with every parameter randomised.

Per-token and per-frame modulation are checked against the reference run the way the families run it: diffusers'
per-sample module on the tokens flattened into the batch (per token), and the Cosmos transformer's expansion of a
per-frame embedding to every token of its frame (per frame). Tolerance: the reference's own fp32-vs-fp64 noise.
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.nn import adaln
from vidax_core.nn.timestep import timestep_embedding

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

EPS32 = float(np.finfo(np.float32).eps)
D = 16


def _randomise(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.4)


def _lin(ours, ref: torch.nn.Linear) -> None:
    ours.kernel.set_value(jnp.asarray(ref.weight.detach().numpy().T))
    if ref.bias is not None:
        ours.bias.set_value(jnp.asarray(ref.bias.detach().numpy()))


def _arr(shape, seed, scale=1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _ref_pair(fn, module, *inputs):
    """fn(module, *torch inputs) in fp32 and fp64 -> lists of numpy outputs."""
    with torch.no_grad():
        r32 = fn(module.float(), *(torch.from_numpy(i) for i in inputs))
        m64 = copy.deepcopy(module).double()
        r64 = fn(m64, *(torch.from_numpy(i).double() for i in inputs))
    r32 = r32 if isinstance(r32, tuple) else (r32,)
    r64 = r64 if isinstance(r64, tuple) else (r64,)
    return [t.numpy() for t in r32], [t.numpy() for t in r64]


def _close(ours, r32, r64, factor=4.0) -> float:
    worst = 0.0
    for o, a, b in zip(ours, r32, r64):
        o = np.asarray(o, np.float64)
        assert o.shape == b.shape, (o.shape, b.shape)
        noise = np.abs(a - b).max()
        err = np.abs(o - b).max()
        assert err <= factor * noise + EPS32 * np.abs(b).max(), (err, noise)
        worst = max(worst, err)
    return worst


def test_ada_layer_norm_zero_per_sample():
    from diffusers.models.normalization import AdaLayerNormZero as Ref

    ref = Ref(D)
    _randomise(ref, 0)
    ours = adaln.AdaLayerNormZero(D, rngs=nnx.Rngs(0))
    _lin(ours.linear, ref.linear)
    x, emb = _arr((2, 7, D), 1, 2.0), _arr((2, D), 2)
    r32, r64 = _ref_pair(lambda m, a, e: m(a, emb=e), ref, x, emb)
    _close(ours(jnp.asarray(x), jnp.asarray(emb)), r32, r64)


def test_ada_layer_norm_zero_per_token():
    """(B, S, Dc) embedding: each token is its own "sample" for the reference."""
    from diffusers.models.normalization import AdaLayerNormZero as Ref

    ref = Ref(D)
    _randomise(ref, 3)
    ours = adaln.AdaLayerNormZero(D, rngs=nnx.Rngs(0))
    _lin(ours.linear, ref.linear)
    b, s = 2, 5
    x, emb = _arr((b, s, D), 4, 2.0), _arr((b, s, D), 5)

    def flat(m, a, e):
        y, *rest = m(a.reshape(b * s, 1, D), emb=e.reshape(b * s, D))
        return (y.reshape(b, s, D), *(r.reshape(b, s, D) for r in rest))

    r32, r64 = _ref_pair(flat, ref, x, emb)
    _close(ours(jnp.asarray(x), jnp.asarray(emb)), r32, r64)


class _Fixed(torch.nn.Module):
    """A torch module returning a jax function of its (numpy-convertible) input, in the input's dtype."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return torch.from_numpy(np.array(self.fn(jnp.asarray(x.float().numpy())))).to(x.dtype)


def test_ada_layer_norm_single_per_sample_and_per_token():
    """PixArt AdaLN-single; LTX image-to-video feeds a (B, S) timestep flattened and reshapes the result."""
    from diffusers.models.normalization import AdaLayerNormSingle as Ref

    ref = Ref(D, use_additional_conditions=False)
    _randomise(ref, 6)
    ours = adaln.AdaLayerNormSingle(D, rngs=nnx.Rngs(0))
    _lin(ours.timestep_embedder.linear_1, ref.emb.timestep_embedder.linear_1)
    _lin(ours.timestep_embedder.linear_2, ref.emb.timestep_embedder.linear_2)
    _lin(ours.linear, ref.linear)
    # The sinusoid is checked against diffusers in test_nn_timestep.py (fp32 angle-rounding bound, which at
    # t ~ 1000 is far above this MLP's noise); here the reference runs on OUR sinusoid so the tolerance is the
    # reference's own fp32-vs-fp64 noise on the rest of the module.
    ref.emb.time_proj = _Fixed(lambda tt: timestep_embedding(tt, 256, flip_sin_to_cos=True, downscale_freq_shift=0))

    t = np.array([3.0, 871.5], np.float32)
    r32, r64 = _ref_pair(lambda m, tt: m(tt, batch_size=2, hidden_dtype=tt.dtype), ref, t)
    mod, emb = ours(jnp.asarray(t))
    _close([mod, emb], r32, r64)

    b, s = 2, 6
    tt = np.random.default_rng(7).uniform(0, 1000, (b, s)).astype(np.float32)
    tt[:, :2] = 0.0  # conditioning tokens at t = 0

    def per_token(m, t_):
        mod_, emb_ = m(t_.flatten(), batch_size=b, hidden_dtype=t_.dtype)
        return mod_.view(b, s, -1), emb_.view(b, s, -1)

    r32, r64 = _ref_pair(per_token, ref, tt)
    mod, emb = ours(jnp.asarray(tt))
    assert mod.shape == (b, s, 6 * D)
    _close([mod, emb], r32, r64)


@pytest.mark.parametrize("affine,bias,norm", [(True, True, "layer_norm"), (False, False, "layer_norm"),
                                              (True, True, "rms_norm")])
def test_ada_layer_norm_continuous(affine, bias, norm):
    from diffusers.models.normalization import AdaLayerNormContinuous as Ref

    cond_dim = 12
    ref = Ref(D, cond_dim, elementwise_affine=affine, eps=1e-6, bias=bias, norm_type=norm)
    _randomise(ref, 8)
    with torch.no_grad():
        if getattr(ref.norm, "weight", None) is not None:
            ref.norm.weight.add_(1.0)
    ours = adaln.AdaLayerNormContinuous(D, cond_dim, eps=1e-6, affine=affine, bias=bias, norm=norm,
                                        rngs=nnx.Rngs(0))
    _lin(ours.linear, ref.linear)
    if affine:
        ours.norm_scale.set_value(jnp.asarray(ref.norm.weight.detach().numpy()))
        if ours.norm_bias is not None:
            ours.norm_bias.set_value(jnp.asarray(ref.norm.bias.detach().numpy()))
    x, c = _arr((2, 5, D), 9, 2.0), _arr((2, cond_dim), 10)
    r32, r64 = _ref_pair(lambda m, a, e: m(a, e), ref, x, c)
    _close([ours(jnp.asarray(x), jnp.asarray(c))], r32, r64)


def _cosmos_expand(e, b, f, hw):
    """The Cosmos transformer's per-frame expansion: (B*F, C) -> (B, F*H*W, C)."""
    return e.reshape(b, f, 1, -1).expand(-1, -1, hw, -1).flatten(1, 2)


@pytest.mark.parametrize("per_frame", [False, True])
def test_adaln_lora_matches_cosmos_zero(per_frame):
    from diffusers.models.transformers.transformer_cosmos import (
        CosmosAdaLayerNormZero as Ref,
    )

    lora = 4
    ref = Ref(D, lora)
    _randomise(ref, 11)
    ours = adaln.AdaLNLoRA(D, lora, rngs=nnx.Rngs(0))
    _lin(ours.linear_1, ref.linear_1)
    _lin(ours.linear_2, ref.linear_2)
    b, f, hw = 2, 3, 4
    x = _arr((b, f * hw, D), 12, 2.0)
    if per_frame:
        e, shared = _arr((b, f, D), 13), _arr((b, f, 3 * D), 14)

        def call(m, a, e_, s_):
            return m(a, _cosmos_expand(e_, b, f, hw), _cosmos_expand(s_, b, f, hw))

        r32, r64 = _ref_pair(call, ref, x, e, shared)
        y, g = ours(jnp.asarray(x), jnp.asarray(e), jnp.asarray(shared), per_frame=True)
        # the gate stays per frame; expand it like the reference for the comparison
        g = jnp.repeat(g, hw, axis=1)
    else:
        e, shared = _arr((b, D), 13), _arr((b, 3 * D), 14)
        r32, r64 = _ref_pair(lambda m, a, e_, s_: m(a, e_, s_), ref, x, e, shared)
        y, g = ours(jnp.asarray(x), jnp.asarray(e), jnp.asarray(shared))
        g = g[:, None]
    _close([y, g], r32, r64)


def test_adaln_lora_two_chunks_matches_cosmos_norm_out():
    """CosmosAdaLayerNorm (output head): shift/scale only, the shared term's first 2 * D features."""
    from diffusers.models.transformers.transformer_cosmos import (
        CosmosAdaLayerNorm as Ref,
    )

    ref = Ref(D, 4)
    _randomise(ref, 15)
    ours = adaln.AdaLNLoRA(D, 4, n=2, rngs=nnx.Rngs(0))
    _lin(ours.linear_1, ref.linear_1)
    _lin(ours.linear_2, ref.linear_2)
    x, e, shared = _arr((2, 6, D), 16, 2.0), _arr((2, D), 17), _arr((2, 3 * D), 18)
    r32, r64 = _ref_pair(lambda m, a, e_, s_: m(a, e_, s_), ref, x, e, shared)
    _close([ours(jnp.asarray(x), jnp.asarray(e), jnp.asarray(shared))], r32, r64)


def test_per_frame_equals_per_token_expansion():
    """modulate/gate with per-frame (B, F, D) == the same values repeated to every token of the frame."""
    b, f, hw = 2, 3, 5
    x = jnp.asarray(_arr((b, f * hw, D), 19))
    sh, sc, g = (jnp.asarray(_arr((b, f, D), 20 + i)) for i in range(3))

    def rep(m):
        return jnp.repeat(m, hw, axis=1)

    np.testing.assert_array_equal(np.asarray(adaln.modulate(x, sh, sc, per_frame=True)),
                                  np.asarray(adaln.modulate(x, rep(sh), rep(sc))))
    np.testing.assert_array_equal(np.asarray(adaln.gate(x, g, per_frame=True)), np.asarray(adaln.gate(x, rep(g))))
    with pytest.raises(ValueError):
        adaln.modulate(x[:, :-1], sh, sc, per_frame=True)


def test_split_modulation_with_table():
    b, n = 2, 6
    mod = _arr((b, n * D), 30)
    table = _arr((n, D), 31)
    parts = adaln.split_modulation(jnp.asarray(mod), n, jnp.asarray(table))
    for i, p in enumerate(parts):
        np.testing.assert_allclose(np.asarray(p), mod.reshape(b, n, D)[:, i] + table[i], rtol=0, atol=0)
    per_token = adaln.split_modulation(jnp.asarray(_arr((b, 4, n * D), 32)), n, jnp.asarray(table))
    assert per_token[0].shape == (b, 4, D)
