"""The core attention block (vidax_core.nn.attention_block) against diffusers' ``Attention`` (default processor:
per-head q/k norms, cross-attention under a key mask, no norm) and, where diffusers has no stand-alone processor
for it (a q/k norm across heads, RoPE in either pair convention, Wan's added image key/values, STG's value skip),
against a float64 numpy reference written from the papers' formulas. Weights are loaded through the core key rules
(vidax_core.io.diffusers_rules.attention_rules). Tolerance: the reference's own fp32-vs-fp64 noise, or a few fp32
ulps of the output's scale against the float64 reference.
"""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.io.diffusers_rules import attention_rules
from vidax_core.io.load import load_model
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.state import flat_state

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

EPS32 = float(np.finfo(np.float32).eps)
HEADS, HD = 2, 8
D = HEADS * HD
KV = 12  # cross-attention key/value width


def _rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _diffusers(qk_norm, bias, cross, seed, eps=1e-6):
    from diffusers.models.attention_processor import Attention as Ref

    ref = Ref(D, cross_attention_dim=KV if cross else None, heads=HEADS, dim_head=HD, bias=bias, out_bias=bias,
              qk_norm=qk_norm, eps=eps)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.4)
    return ref


def _ours_from(tensors, **kw):
    make = lambda: Attention(D, HEADS, dtype=np.float32, rngs=nnx.Rngs(0), **kw)  # noqa: E731
    return load_model(make, tensors, attention_rules("attn", "", bias=kw.get("bias", True),
                                                     qk_norm=kw.get("qk_norm", "rms_norm"),
                                                     added_kv=kw.get("added_kv_dim") is not None),
                      component="attention")


def _check(got, r32, r64, factor=4.0):
    noise = np.abs(r32 - r64).max()
    err = np.abs(np.asarray(got, np.float64) - r64).max()
    assert err <= factor * noise + 4 * EPS32 * np.abs(r64).max(), (err, noise)
    return err


@pytest.mark.parametrize("qk_norm,bias,cross", [("rms_norm", True, False), ("layer_norm", True, True),
                                                 (None, False, True)])
def test_matches_diffusers_attention(qk_norm, bias, cross):
    ref = _diffusers(qk_norm, bias, cross, seed=1)
    tensors = {f"attn.{k}": v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = _ours_from(tensors, kv_dim=KV if cross else None, bias=bias, qk_norm=qk_norm)
    x = _rand((2, 9, D), 2)
    ctx = _rand((2, 5, KV), 3) if cross else None
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool) if cross else None

    def run(m, dtype):
        kw = {}
        if cross:
            kw["encoder_hidden_states"] = torch.from_numpy(ctx).to(dtype)
            bias_ = np.where(mask, 0.0, -1e30)[:, None, :]
            kw["attention_mask"] = torch.from_numpy(bias_).to(dtype)
        return m(torch.from_numpy(x).to(dtype), **kw).detach().numpy()

    with torch.no_grad():
        r32, r64 = run(ref, torch.float32), run(copy.deepcopy(ref).double(), torch.float64)
    with jax.default_matmul_precision("highest"):
        got = ours(x, ctx, kv_mask=None if mask is None else mask)
    err = _check(got, r32, r64)
    print(f"attention qk_norm={qk_norm} cross={cross}: max_abs={err:.3e}")


# -- float64 numpy reference --------------------------------------------------------------------------------------


def _lin(p, name, x):
    y = x @ p[(name, "kernel")].astype(np.float64)
    return y + p[(name, "bias")] if (name, "bias") in p else y


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, cos, sin, style):
    """x (B, S, H, D), cos/sin (S, D/2)."""
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    if style == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def _softmax_attn(q, k, v):
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", w, v)


def _reference(p, x, kv=None, rope=None, style="interleaved", added=None, skip=None, eps=1e-6):
    """Attention with q/k RMS-normed across all heads (Wan / LTX)."""
    x = x.astype(np.float64)
    src = x if kv is None else kv.astype(np.float64)
    heads = lambda t: t.reshape(*t.shape[:2], HEADS, -1)  # noqa: E731
    q = heads(_rms(_lin(p, "to_q", x), p[("norm_q", "scale")], eps))
    k = heads(_rms(_lin(p, "to_k", src), p[("norm_k", "scale")], eps))
    v = heads(_lin(p, "to_v", src))
    if rope is not None:
        q, k = _rope(q, *rope, style), _rope(k, *rope, style)
    o = _softmax_attn(q, k, v)
    if skip is not None:
        o = np.where(skip[:, None, None, None] > 0, v, o)
    if added is not None:
        a = added.astype(np.float64)
        k2 = heads(_rms(_lin(p, "add_k_proj", a), p[("norm_added_k", "scale")], eps))
        o = o + _softmax_attn(q, k2, heads(_lin(p, "add_v_proj", a)))
    return _lin(p, "to_out", o.reshape(*o.shape[:2], -1))


def _random_module(**kw):
    m = Attention(D, HEADS, dtype=np.float32, rngs=nnx.Rngs(7), qk_norm="rms_norm_across_heads", **kw)
    rng = np.random.default_rng(8)
    for path, var in nnx.to_flat_state(nnx.state(m)):
        var.set_value(rng.standard_normal(var.get_value().shape).astype(np.float32) * 0.4 + (path[-1] == "scale"))
    return m, {tuple(k): np.asarray(v, np.float64) for k, v in flat_state(m).items()}


def _rope_tables(s, seed):
    ang = np.random.default_rng(seed).uniform(-3, 3, (s, HD // 2))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@pytest.mark.parametrize("style", ["interleaved", "rotate_half"])
def test_self_attention_with_rope_and_norm_across_heads(style):
    m, p = _random_module(rope=style)
    x = _rand((2, 6, D), 9)
    cos, sin = _rope_tables(6, 10)
    with jax.default_matmul_precision("highest"):
        got = np.asarray(m(x, None, (cos, sin)), np.float64)
    want = _reference(p, x, rope=(cos.astype(np.float64), sin.astype(np.float64)), style=style)
    err = np.abs(got - want).max()
    print(f"attention self rope={style}: max_abs={err:.3e}")
    assert err <= 16 * EPS32 * np.abs(want).max(), err
    other = "rotate_half" if style == "interleaved" else "interleaved"
    assert np.abs(_reference(p, x, rope=(cos, sin), style=other) - want).max() > 1e-3  # the convention matters


def test_cross_attention_with_added_key_values():
    m, p = _random_module(kv_dim=KV, added_kv_dim=10)
    x, ctx, img = _rand((2, 6, D), 11), _rand((2, 4, KV), 12), _rand((2, 3, 10), 13)
    with jax.default_matmul_precision("highest"):
        got = np.asarray(m(x, ctx, added_kv=img), np.float64)
        plain = np.asarray(m(x, ctx), np.float64)
    want = _reference(p, x, kv=ctx, added=img)
    assert np.abs(got - want).max() <= 16 * EPS32 * np.abs(want).max()
    assert np.abs(plain - _reference(p, x, kv=ctx)).max() <= 16 * EPS32 * np.abs(want).max()
    assert np.abs(got - plain).max() > 1e-3
    with pytest.raises(ValueError, match="added"):
        m(x, None, added_kv=img)
    with pytest.raises(ValueError, match="RoPE"):
        m(x, ctx, _rope_tables(6, 1))


def test_skip_passes_the_values_through_per_sample():
    m, p = _random_module()
    x = _rand((2, 5, D), 14)
    skip = np.array([1.0, 0.0], np.float32)
    with jax.default_matmul_precision("highest"):
        got = np.asarray(m(x, skip=skip), np.float64)
    want = _reference(p, x, skip=skip)
    assert np.abs(got - want).max() <= 16 * EPS32 * np.abs(want).max()
    assert np.abs(got[0] - _reference(p, x)[0]).max() > 1e-3


def test_joint_streams_equal_attention_over_the_concatenation():
    """qkv() + joint_attention + out() of two streams is one self-attention over [text; video]."""
    m, p = _random_module()
    txt, vid = _rand((2, 3, D), 15), _rand((2, 7, D), 16)
    with jax.default_matmul_precision("highest"):
        ot, ov = ulysses.joint_attention(m.qkv(txt, None), m.qkv(vid))
        got = np.concatenate([np.asarray(m.out(ot, None)), np.asarray(m.out(ov))], axis=1)
    want = _reference(p, np.concatenate([txt, vid], axis=1))
    assert np.abs(got - want).max() <= 16 * EPS32 * np.abs(want).max()


def test_parameter_tree_and_logical_axes():
    m = nnx.eval_shape(lambda: Attention(D, HEADS, dtype=np.float32, rngs=nnx.Rngs(0), kv_dim=KV, added_kv_dim=10,
                                         qk_norm="rms_norm_across_heads"))
    names = {"/".join(map(str, p)): (v.get_value().shape, v.get_metadata().get("out_sharding"))
             for p, v in nnx.to_flat_state(nnx.state(m))}
    assert names["to_q/kernel"] == ((D, D), ("embed", "heads"))
    assert names["to_k/kernel"] == ((KV, D), ("embed", "heads"))
    assert names["to_out/kernel"] == ((D, D), ("heads", "embed"))
    assert names["norm_q/scale"] == ((D,), ("heads",))
    assert names["add_k_proj/kernel"] == ((10, D), ("embed", "heads"))
    assert names["norm_added_k/scale"] == ((D,), ("heads",))
    per_head = nnx.eval_shape(lambda: Attention(D, HEADS, dtype=np.float32, rngs=nnx.Rngs(0), qk_norm="layer_norm"))
    flat = {"/".join(map(str, p)): v.shape for p, v in flat_state(per_head).items()}
    assert flat["norm_q/scale"] == (HD,) and flat["norm_q/bias"] == (HD,)
