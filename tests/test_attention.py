"""Attention backends against a float64 numpy reference, plus backend dispatch (auto/explicit/errors)."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core import attention as att
from vidax_core.attention.kernels import _common, blockwise, pallas_tpu, per_head, splash_tpu
from vidax_core.errors import UserError

RTOL = 1e-5  # max |out - ref| / max |ref|, fp32 inputs


def reference(q, k, v, kv_mask=None, q_seg=None, kv_seg=None):
    """float64 numpy softmax attention; rows that see no key average v over all keys."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    vis = np.ones((q.shape[0], 1, q.shape[1], k.shape[1]), bool)
    if kv_mask is not None:
        vis &= np.asarray(kv_mask, bool)[:, None, None, :]
    if q_seg is not None:
        vis &= (np.asarray(q_seg)[:, :, None] == np.asarray(kv_seg)[:, None, :])[:, None]
    vis = np.broadcast_to(vis, logits.shape)
    empty = ~vis.any(-1, keepdims=True)
    logits = np.where(vis | empty, logits * ~empty, -np.inf)  # empty rows: all-zero logits -> uniform
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def make_case(seed, b, sq, sk, h, d, *, mask=False, segments=False):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float32) for s in (sq, sk, sk))
    kw = {}
    if mask:
        m = rng.random((b, sk)) < 0.7
        m[0, :] = False  # a batch row whose keys are all padding
        if b > 2:
            m[2, :] = np.arange(sk) < max(1, sk // 3)  # right-padded text mask
        kw["kv_mask"] = m
    if segments:
        qs = rng.integers(0, 3, (b, sq)).astype(np.int32)
        qs[:, :3] = 7  # a segment no key has: rows that see nothing
        kw["q_segment_ids"] = qs
        kw["kv_segment_ids"] = rng.integers(0, 3, (b, sk)).astype(np.int32)
    return q, k, v, kw


CASES = {
    "self": (0, 2, 37, 37, 2, 16, {}),
    "cross_mask": (1, 3, 45, 23, 3, 8, {"mask": True}),
    "long_kv_mask": (2, 3, 19, 130, 2, 32, {"mask": True}),
    "segments": (3, 2, 41, 29, 2, 8, {"segments": True}),
    "segments_mask": (4, 3, 33, 50, 2, 8, {"segments": True, "mask": True}),
}

CPU_BACKENDS = {
    "xla": att.xla_attention,
    "blockwise": blockwise.attention,
    "einsum": att.einsum_attention,
    "per_head": per_head.attention,
    "blockwise_odd_blocks": lambda q, k, v, **kw: blockwise.attention(q, k, v, block_q=5, block_k=7, **kw),
}


def rel_err(out, ref):
    out = np.asarray(out, np.float64)
    assert out.shape == ref.shape and np.all(np.isfinite(out))
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


MATRIX = [(b, c) for b in CPU_BACKENDS for c in CASES if b != "blockwise" or c in ("self", "segments_mask")]


@pytest.mark.parametrize("backend, case", MATRIX)
def test_cpu_backends_match_float64_reference(backend, case):
    seed, b, sq, sk, h, d, opts = CASES[case]
    q, k, v, kw = make_case(seed, b, sq, sk, h, d, **opts)
    out = jax.jit(CPU_BACKENDS[backend])(q, k, v, **kw)
    assert out.dtype == jnp.float32
    assert rel_err(out, reference(q, k, v, kw.get("kv_mask"), **_segs(kw))) < RTOL


def _segs(kw):
    return {"q_seg": kw.get("q_segment_ids"), "kv_seg": kw.get("kv_segment_ids")}


def _interpret_available():
    if pallas_tpu.import_error() is not None:
        return False
    from jax.experimental.pallas import tpu as pltpu

    return hasattr(pltpu, "force_tpu_interpret_mode")


@pytest.mark.skipif(not _interpret_available(), reason="this jax has no Pallas TPU interpret mode / flash kernel")
@pytest.mark.parametrize(
    "shape, opts",
    [
        ((2, 200, 200, 1, 64), {"mask": True}),  # S=200 -> 256, D=64 -> 128, two kv blocks of 128
        ((2, 130, 75, 1, 40), {"segments": True, "mask": True}),  # cross-attention, segment ids + mask
    ],
)
def test_pallas_tpu_interpret_matches_reference(shape, opts):
    b, sq, sk, h, d = shape
    q, k, v, kw = make_case(5, b, sq, sk, h, d, **opts)
    out = pallas_tpu.attention(q, k, v, block_q=128, block_k=128, interpret=True, **kw)
    ref = reference(q, k, v, kw.get("kv_mask"), **_segs(kw))
    assert rel_err(out, ref) < RTOL
    assert rel_err(out, att.xla_attention(q, k, v, **kw)) < RTOL


def test_rows_without_keys_matches_dense_check():
    q, k, v, kw = make_case(6, 3, 40, 31, 1, 4, segments=True, mask=True)
    got = _common.rows_without_keys(kw["kv_mask"], kw["q_segment_ids"], kw["kv_segment_ids"], 40)
    dense = (kw["q_segment_ids"][:, :, None] == kw["kv_segment_ids"][:, None, :]) & kw["kv_mask"][:, None, :]
    np.testing.assert_array_equal(np.asarray(got), ~dense.any(-1))


def _original_einsum(q, k, v, kv_mask=None):
    """The implementation models were written against (before the backends existed)."""
    scale = 1.0 / jnp.sqrt(jnp.asarray(q.shape[-1], jnp.float32))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    if kv_mask is not None:
        logits = jnp.where(kv_mask[:, None, None, :], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def test_default_is_xla_and_the_model_call_is_unchanged():
    assert att.DEFAULT_BACKEND == "xla"  # what a process runs until the pipeline calls set_backend
    q, k, v, kw = make_case(7, 3, 12, 9, 2, 8, mask=True)
    with att.use_backend("xla"):
        for m in (None, kw["kv_mask"]):
            # the einsum formulation is the original one, bit for bit; on CPU the backend loops over heads,
            # which reorders nothing but the fusion, so it agrees to fp32 rounding
            np.testing.assert_array_equal(np.asarray(att.einsum_attention(q, k, v, kv_mask=m)),
                                          np.asarray(_original_einsum(q, k, v, m)))
            out = att.attention(q, k, v, kv_mask=m)
            np.testing.assert_allclose(np.asarray(out), np.asarray(_original_einsum(q, k, v, m)), rtol=0, atol=1e-6)
    assert rel_err(out, reference(q, k, v, kw["kv_mask"])) < RTOL


def test_bfloat16_blockwise_close_to_xla():
    q, k, v, kw = make_case(8, 2, 40, 40, 2, 16, mask=True)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    out = blockwise.attention(q, k, v, block_q=16, block_k=32, **kw)
    assert out.dtype == jnp.bfloat16
    ref = reference(np.asarray(q, np.float32), np.asarray(k, np.float32), np.asarray(v, np.float32), kw["kv_mask"])
    assert rel_err(out.astype(jnp.float32), ref) < 2e-2


def test_auto_on_cpu_logs_its_choice(caplog):
    caplog.set_level(logging.INFO, logger="vidax.attention")
    before = att.get_backend()
    with att.use_backend("auto") as chosen:
        assert chosen == "xla" == att.get_backend()
        q, k, v, kw = make_case(9, 3, 33, 21, 2, 8, mask=True)
        out = jax.jit(lambda a, b, c, m: att.attention(a, b, c, kv_mask=m))(q, k, v, kw["kv_mask"])
        assert rel_err(out, reference(q, k, v, kw["kv_mask"])) < RTOL
    assert att.get_backend() == before  # restored
    msgs = [r.getMessage() for r in caplog.records if r.name == "vidax.attention" and r.levelno == logging.INFO]
    assert any("auto -> xla" in m for m in msgs), msgs


@pytest.mark.parametrize(
    "name, message",
    [
        ("cudnn", "attention.backend=cudnn needs a CUDA GPU; this process runs on cpu: use auto or xla"),
        ("pallas_tpu", "attention.backend=pallas_tpu needs a TPU; this process runs on cpu: use auto or xla"),
        ("splash", "attention.backend=splash needs a TPU; this process runs on cpu: use auto or xla"),
        ("flash", "attention.backend=flash is not one of auto, xla, cudnn, splash, pallas_tpu, blockwise"),
    ],
)
def test_explicit_backend_that_cannot_run_raises(name, message):
    with pytest.raises(UserError) as e:
        att.resolve_backend(name, platform="cpu")
    assert str(e.value) == message and "\n" not in str(e.value)
    if name == "cudnn" and jax.default_backend() == "cpu":
        before = att.get_backend()
        with pytest.raises(UserError, match="needs a CUDA GPU"):
            att.set_backend(name)
        assert att.get_backend() == before  # a failed set changes nothing


def test_resolve_backend_by_platform(caplog):
    caplog.set_level(logging.INFO, logger="vidax.attention")
    assert att.resolve_backend("xla", platform="cpu") == "xla"
    assert att.resolve_backend("blockwise", platform="tpu") == "blockwise"
    assert att.resolve_backend("auto", platform="cpu") == "xla"
    assert att.resolve_backend("auto", platform="tpu") == ("splash" if splash_tpu.import_error() is None else
                                                           "pallas_tpu" if pallas_tpu.import_error() is None else "xla")
    assert att.resolve_backend("auto", platform="METAL") == "xla"
    if jax.default_backend() != "gpu":
        assert att.resolve_backend("auto", platform="gpu") == "xla"  # cuDNN not usable without a GPU: logged
        assert any("auto -> xla (no cuDNN" in r.getMessage() for r in caplog.records)


def test_cudnn_dispatch_rules_for_inputs_cudnn_cannot_take(monkeypatch, caplog):
    """fp32 under auto->cudnn runs on xla and logs once; under an explicit cudnn it is a UserError."""
    caplog.set_level(logging.INFO, logger="vidax.attention")
    q, k, v, _ = make_case(10, 1, 8, 8, 1, 8)
    monkeypatch.setattr(att, "_resolved", "cudnn")
    monkeypatch.setattr(att, "_requested", "auto")
    monkeypatch.setattr(att, "_fallbacks_logged", set())
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(att.attention(q, k, v)), np.asarray(att.xla_attention(q, k, v)))
    assert sum("using xla for such calls" in r.getMessage() for r in caplog.records) == 1
    monkeypatch.setattr(att, "_requested", "cudnn")
    with pytest.raises(UserError, match="bfloat16/float16 inputs, got float32"):
        att.attention(q, k, v)


def test_bad_arguments_are_value_errors():
    q = jnp.zeros((1, 4, 2, 8))
    with pytest.raises(ValueError, match="kv_mask"):
        att.attention(q, q, q, kv_mask=jnp.ones((1, 5), bool))
    with pytest.raises(ValueError, match="both"):
        att.attention(q, q, q, q_segment_ids=jnp.zeros((1, 4), jnp.int32))


def _max_long_dims(jaxpr, s):
    """Most dims of size >= s in any value of the jaxpr, sub-jaxprs (scan bodies) included."""
    worst = 0
    for eqn in jaxpr.eqns:
        for var in list(eqn.invars) + list(eqn.outvars):
            worst = max(worst, sum(1 for n in getattr(getattr(var, "aval", None), "shape", ()) if n >= s))
        for p in eqn.params.values():
            inner = getattr(p, "jaxpr", p)  # ClosedJaxpr -> Jaxpr
            if hasattr(inner, "eqns"):
                worst = max(worst, _max_long_dims(inner, s))
    return worst


def test_blockwise_memory_grows_linearly():
    def temp_bytes(s):
        x = jax.ShapeDtypeStruct((1, s, 2, 64), jnp.float32)
        fn = jax.jit(lambda a, b, c: blockwise.attention(a, b, c, block_q=256, block_k=512))
        return fn.lower(x, x, x).compile().memory_analysis().temp_size_in_bytes, jax.make_jaxpr(fn)(x, x, x)

    t4, jaxpr4 = temp_bytes(4096)
    t8, _ = temp_bytes(8192)
    # Quadratic would be x4 (the einsum backend: 256 MiB -> 1 GiB); blockwise measured 8.9 MB -> 15.2 MB.
    assert t8 / t4 < 2.5, (t4, t8)
    assert t8 < 8192 * 8192 * 2 * 4 / 16, t8  # far below one (S, S) fp32 logits tensor per head
    assert _max_long_dims(jaxpr4.jaxpr, 4096) <= 1  # no value has two sequence-length dims
