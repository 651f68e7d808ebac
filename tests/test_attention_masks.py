"""Key lengths, causal and mixture-of-transformers masks on every CPU-runnable attention backend, against a
float64 numpy softmax with an explicit boolean (B, Sq, Sk) mask; and no masked path of the memory-linear backends
holds an (Sq, Sk) array at Wan 720p sequence lengths (traced only, never run).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core import attention as att
from vidax_core.attention.kernels import _common, blockwise, cudnn, pallas_tpu, per_head, splash_tpu


def dense_mask(b, sq, sk, *, kv_mask=None, q_seg=None, kv_seg=None, causal=False, mot_text=None):
    """(B, Sq, Sk) bool written straight from the definitions (not from the code's causal_limit)."""
    vis = np.ones((b, sq, sk), bool)
    if kv_mask is not None:
        vis &= np.asarray(kv_mask, bool)[:, None, :]
    if q_seg is not None:
        vis &= np.asarray(q_seg)[:, :, None] == np.asarray(kv_seg)[:, None, :]
    for i in range(sq):
        for j in range(sk):
            if causal and j > i:
                vis[:, i, j] = False
            if mot_text is not None and i < mot_text and (j >= mot_text or j > i):
                vis[:, i, j] = False  # text row: causal, text keys only; video rows: everything
    return vis


def reference(q, k, v, vis):
    """float64 softmax attention under ``vis``; a row that sees no key averages v over all keys."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    vis = np.broadcast_to(vis[:, None], logits.shape)
    empty = ~vis.any(-1, keepdims=True)
    logits = np.where(vis | empty, logits * ~empty, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def make_case(name, seed=0, b=3, s=37, h=2, d=8, s_txt=9):
    """(q, k, v, call keywords, dense mask) for one mask kind; every masked-key case has a row that sees no key."""
    rng = np.random.default_rng(seed)
    sq = sk = s
    if name == "lengths":
        sk = 23  # cross-attention
    q = rng.standard_normal((b, sq, h, d)).astype(np.float32)
    k, v = (rng.standard_normal((b, sk, h, d)).astype(np.float32) for _ in range(2))
    kw, dm = {}, {}
    if name == "lengths":
        lengths = np.array([0, sk // 3, sk][:b], np.int32)
        kw["kv_lengths"] = lengths
        dm["kv_mask"] = np.arange(sk)[None, :] < lengths[:, None]
    elif name in ("causal", "causal_mask", "causal_segments"):
        kw["causal"] = dm["causal"] = True
        if name != "causal":
            m = rng.random((b, sk)) < 0.7
            m[0, :] = False  # all keys padded
            m[1, :5] = False  # left padding: the first causal rows see nothing
            kw["kv_mask"] = dm["kv_mask"] = m
        if name == "causal_segments":
            kw["q_segment_ids"] = dm["q_seg"] = rng.integers(0, 3, (b, sq)).astype(np.int32)
            kw["kv_segment_ids"] = dm["kv_seg"] = rng.integers(0, 3, (b, sk)).astype(np.int32)
    elif name in ("mot", "mot_padded", "mot_segments"):
        kw["causal_prefix"] = dm["mot_text"] = s_txt
        if name != "mot":  # right-padded text (lengths 0, 4, s_txt), video keys all valid
            txt_len = np.array([0, 4, s_txt][:b])
            m = np.concatenate([np.arange(s_txt)[None] < txt_len[:, None], np.ones((b, sk - s_txt), bool)], 1)
            kw["kv_mask"] = dm["kv_mask"] = m
        if name == "mot_segments":  # two packed samples per row
            seg = (np.arange(sq)[None] >= np.array([20, 30, 15][:b])[:, None]).astype(np.int32)
            kw["q_segment_ids"] = kw["kv_segment_ids"] = dm["q_seg"] = dm["kv_seg"] = seg
    else:
        raise AssertionError(name)
    return q, k, v, kw, dense_mask(b, sq, sk, **dm)


CASES = ("lengths", "causal", "causal_mask", "causal_segments", "mot", "mot_padded", "mot_segments")


def _lengths_to_kw(kw, sk):
    """Backends below the dispatcher take kv_mask, not kv_lengths."""
    kw = dict(kw)
    if "kv_lengths" in kw:
        kw["kv_mask"] = np.arange(sk)[None, :] < kw.pop("kv_lengths")[:, None]
    return kw


KERNELS = {
    "einsum": att.einsum_attention,
    "xla": att.xla_attention,  # per-head loop on CPU
    "per_head": per_head.attention,
    "blockwise": blockwise.attention,
    "blockwise_odd_blocks": lambda q, k, v, **kw: blockwise.attention(q, k, v, block_q=5, block_k=7, **kw),
}


def rel_err(out, ref):
    out = np.asarray(out, np.float64)
    assert out.shape == ref.shape and np.all(np.isfinite(out))
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


def fp32_noise(q, k, v, vis):
    """The reference's own fp32 error (fp32 numpy softmax attention against float64), the tolerance's unit."""
    q32, k32, v32 = (np.asarray(x, np.float32) for x in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q32, k32) / np.float32(np.sqrt(q.shape[-1]))
    visb = np.broadcast_to(vis[:, None], logits.shape)
    empty = ~visb.any(-1, keepdims=True)
    logits = np.where(visb | empty, logits * ~empty, np.float32(-np.inf)).astype(np.float32)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
    out = np.einsum("bhqk,bkhd->bqhd", p, v32)
    return max(rel_err(out, reference(q, k, v, vis)), 1e-7)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("case", CASES)
def test_kernels_match_dense_reference(kernel, case):
    q, k, v, kw, vis = make_case(case)
    ref = reference(q, k, v, vis)
    kw = _lengths_to_kw(kw, k.shape[1])
    flags = {n: kw.pop(n) for n in ("causal", "causal_prefix") if n in kw}  # static
    out = jax.jit(lambda a, b, c, m: KERNELS[kernel](a, b, c, **m, **flags))(q, k, v, kw)
    assert out.dtype == jnp.float32
    assert rel_err(out, ref) < 10 * fp32_noise(q, k, v, vis)


@pytest.mark.parametrize("backend", ["xla", "blockwise"])
@pytest.mark.parametrize("case", CASES)
def test_dispatcher_passes_every_mask_keyword(backend, case):
    q, k, v, kw, vis = make_case(case, seed=1)
    flags = {n: kw.pop(n) for n in ("causal", "causal_prefix") if n in kw}
    with att.use_backend(backend):
        out = jax.jit(lambda a, b, c, m: att.attention(a, b, c, **m, **flags))(q, k, v, kw)
    assert rel_err(out, reference(q, k, v, vis)) < 10 * fp32_noise(q, k, v, vis)


def test_masks_change_the_result():
    """The cases really mask something: the unmasked result is far from each masked reference."""
    for case in CASES:
        q, k, v, kw, vis = make_case(case)
        full = reference(q, k, v, np.ones_like(vis))
        assert rel_err(full, reference(q, k, v, vis)) > 0.05, case


def _interpret_available():
    if pallas_tpu.import_error() is not None:
        return False
    from jax.experimental.pallas import tpu as pltpu

    return hasattr(pltpu, "force_tpu_interpret_mode")


@pytest.mark.skipif(not _interpret_available(), reason="this jax has no Pallas TPU interpret mode / flash kernel")
@pytest.mark.parametrize("case", ["causal_mask", "causal_segments", "mot_padded"])
def test_pallas_tpu_interpret_matches_dense_reference(case):
    # S=150 pads to 256 (two 128-row blocks: causal crosses a block edge), D=8 pads to 128
    q, k, v, kw, vis = make_case(case, seed=2, b=3, s=150, h=1, d=8, s_txt=70)
    out = pallas_tpu.attention(q, k, v, block_q=128, block_k=128, interpret=True, **_lengths_to_kw(kw, k.shape[1]))
    assert rel_err(out, reference(q, k, v, vis)) < 10 * fp32_noise(q, k, v, vis)


@pytest.mark.parametrize("case", CASES)
def test_rows_without_keys_matches_dense_mask(case):
    q, k, v, kw, vis = make_case(case, seed=3)
    kw = _lengths_to_kw(kw, k.shape[1])
    limit = _common.causal_limit(q.shape[1], k.shape[1], kw.get("causal", False), kw.get("causal_prefix"))
    got = _common.rows_without_keys(kw.get("kv_mask"), kw.get("q_segment_ids"), kw.get("kv_segment_ids"),
                                    q.shape[1], limit)
    expected = ~vis.any(-1)
    assert expected.any() == (case not in ("causal", "mot")), case  # causal row i always sees key i
    np.testing.assert_array_equal(np.zeros_like(expected) if got is None else np.asarray(got), expected)


def test_mask_argument_errors():
    q = jnp.zeros((1, 4, 2, 8))
    kv = jnp.zeros((1, 5, 2, 8))
    with pytest.raises(ValueError, match="Sq == Sk"):
        att.attention(q, kv, kv, causal=True)
    with pytest.raises(ValueError, match="not both"):
        att.attention(q, q, q, causal=True, causal_prefix=2)
    with pytest.raises(ValueError, match="causal_prefix must be in"):
        att.attention(q, q, q, causal_prefix=5)
    with pytest.raises(ValueError, match="kv_lengths must be"):
        att.attention(q, q, q, kv_lengths=jnp.array([1, 2]))


# --- no (Sq, Sk) array at Wan 720p lengths ---------------------------------------------------------------------

S_VID = 21 * 45 * 80  # Wan 720p, 81 frames: 21 latent frames of 45 x 80 patches = 75,600 tokens
S_TXT = 120


def _values(jaxpr):
    """Every abstract value in a jaxpr and its sub-jaxprs (scan/while/cond bodies, shard_map, pallas kernels)."""
    for eqn in jaxpr.eqns:
        for var in list(eqn.invars) + list(eqn.outvars):
            aval = getattr(var, "aval", None)
            if aval is not None and hasattr(aval, "shape"):
                yield eqn.primitive.name, aval
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _values(inner)


def sq_by_sk_values(fn, args, sq, sk):
    """Values in fn's jaxpr (traced, never run) that are (Sq, Sk)-sized: two dims >= Sq and >= Sk, or, when
    Sq == Sk, Sq * Sk / 8 elements or more in any layout."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    bad = []
    for prim, aval in _values(jaxpr):
        dims = list(aval.shape)
        two = any(a >= sq and b >= sk for i, a in enumerate(dims) for j, b in enumerate(dims) if i != j)
        if two or (sq == sk and int(np.prod(dims)) * 8 >= sq * sk):
            bad.append((prim, tuple(dims)))
    return bad


def _abstract(b, s, h=2, d=64, dtype=jnp.float32):
    return jax.ShapeDtypeStruct((b, s, h, d), dtype)


MEMORY_CASES = {
    # name: (Sq, Sk, keyword builder)
    "video_self_lengths": (S_VID, S_VID, lambda b, sk: dict(kv_lengths=jnp.full((b,), sk - 7, jnp.int32))),
    "video_self_segments": (S_VID, S_VID, lambda b, sk: dict(q_segment_ids=jnp.zeros((b, sk), jnp.int32),
                                                             kv_segment_ids=jnp.zeros((b, sk), jnp.int32))),
    "video_self_causal_mask": (S_VID, S_VID, lambda b, sk: dict(causal=True, kv_mask=jnp.ones((b, sk), bool))),
    "joint_mot_padded_text": (S_TXT + S_VID, S_TXT + S_VID,
                              lambda b, sk: dict(causal_prefix=S_TXT, kv_mask=jnp.ones((b, sk), bool))),
    "cross_text_lengths": (S_VID, 512, lambda b, sk: dict(kv_lengths=jnp.full((b,), 100, jnp.int32))),
}


@pytest.mark.parametrize("case", list(MEMORY_CASES))
@pytest.mark.parametrize("backend", ["blockwise", "pallas_tpu", "splash"])
def test_no_masked_path_holds_an_sq_by_sk_array_at_720p(backend, case):
    sq, sk, make_kw = MEMORY_CASES[case]
    why = {"pallas_tpu": pallas_tpu.import_error(), "splash": splash_tpu.import_error()}.get(backend)
    if why is not None:
        pytest.skip(why)
    kw = make_kw(1, sk)
    q, kv = _abstract(1, sq), _abstract(1, sk)
    with att.use_backend("blockwise") if backend == "blockwise" else _pallas_dispatch(backend):
        bad = sq_by_sk_values(lambda q, k, v: att.attention(q, k, v, **kw), (q, kv, kv), sq, sk)
    assert not bad, bad


@pytest.mark.parametrize("case", ["video_self_causal_mask", "joint_mot_padded_text", "cross_text_lengths"])
def test_the_memory_check_sees_a_dense_mask(case):
    """The jaxpr walk flags the (Sq, Sk) logits the einsum backend does build (so the test above can fail)."""
    sq, sk, make_kw = MEMORY_CASES[case]
    sq, sk = min(sq, 4096), min(sk, 4096)
    kw = make_kw(1, sk)
    if "causal_prefix" in kw:
        kw["causal_prefix"] = 64
    bad = sq_by_sk_values(lambda q, k, v: att.einsum_attention(q, k, v, **_lengths_to_kw(kw, sk)),
                          (_abstract(1, sq), _abstract(1, sk), _abstract(1, sk)), sq, sk)
    assert bad


def test_cudnn_mot_padding_path_traces_without_an_sq_by_sk_array():
    """cuDNN cannot run here; its MoT + key-padding call still traces, and holds nothing (Sq, Sk)-sized."""
    sq = S_TXT + S_VID
    kw = dict(causal_prefix=S_TXT, kv_mask=jnp.ones((1, sq), bool))
    x = _abstract(1, sq, dtype=jnp.bfloat16)
    try:
        bad = sq_by_sk_values(lambda q, k, v: cudnn.attention(q, k, v, **kw), (x, x, x), sq, sq)
    except Exception as e:  # this jax cannot even trace the cuDNN call without a GPU
        pytest.skip(f"cuDNN attention does not trace on {jax.default_backend()}: {type(e).__name__}: {e}"[:300])
    assert not bad, bad


class _pallas_dispatch:
    """Route att.attention to a Pallas TPU kernel for tracing on a non-TPU host (set_backend would refuse)."""

    def __init__(self, backend: str = "pallas_tpu"):
        self.backend = backend

    def __enter__(self):
        self._saved = (att._requested, att._resolved)
        att._requested = att._resolved = self.backend

    def __exit__(self, *exc):
        att._requested, att._resolved = self._saved


def test_cudnn_dispatch_never_builds_a_long_dense_mask(monkeypatch):
    """Under auto, a cuDNN call whose mask would be dense over long rows runs on blockwise (logged); with
    attention.backend=cudnn it is refused. Short masks and plain padding stay on cuDNN. (Dispatch only: no GPU.)"""
    import vidax_core.attention as att_mod
    from vidax_core.attention.kernels import cudnn as cudnn_mod
    from vidax_core.errors import UserError

    ran = []
    monkeypatch.setattr(cudnn_mod, "unsupported", lambda q: None)
    monkeypatch.setitem(att_mod.IMPLEMENTATIONS, "cudnn", lambda q, k, v, **kw: ran.append("cudnn") or v)
    monkeypatch.setitem(att_mod.IMPLEMENTATIONS, "blockwise", lambda q, k, v, **kw: ran.append("blockwise") or v)
    long_ = jax.ShapeDtypeStruct((1, 8192, 2, 64), jnp.bfloat16)
    short = jax.ShapeDtypeStruct((1, 256, 2, 64), jnp.bfloat16)

    def call(shape, requested, **kw):
        monkeypatch.setattr(att_mod, "_resolved", "cudnn")
        monkeypatch.setattr(att_mod, "_requested", requested)
        s = shape.shape[1]
        x = jnp.zeros(shape.shape, shape.dtype)
        ids = jnp.zeros((1, s), jnp.int32)
        extra = {"segments": dict(q_segment_ids=ids, kv_segment_ids=ids),
                 "causal_pad": dict(causal=True, kv_mask=jnp.ones((1, s), bool)),
                 "pad": dict(kv_mask=jnp.ones((1, s), bool))}[kw["mask"]]
        return att_mod.attention(x, x, x, **extra)

    for mask in ("segments", "causal_pad"):
        ran.clear()
        call(long_, "auto", mask=mask)
        assert ran == ["blockwise"], mask
        ran.clear()
        call(short, "auto", mask=mask)
        assert ran == ["cudnn"], mask
        with pytest.raises(UserError, match="dense .* cuDNN mask: use auto or blockwise"):
            call(long_, "cudnn", mask=mask)
    ran.clear()
    call(long_, "auto", mask="pad")
    assert ran == ["cudnn"]


def test_replicated_attention_causal():
    """``replicated_attention(causal=True)`` (the causal text stream of a mixture-of-transformers DiT) is causal
    softmax attention, combined with a key mask; without ``causal`` it is not."""
    from vidax_core.attention import ulysses

    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((2, 6, 3, 8)).astype(np.float32) for _ in range(3))
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    logits = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(8)
    vis = np.tril(np.ones((6, 6), bool))[None, None] & mask[:, None, None, :]
    logits = np.where(vis, logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    want = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    with jax.default_matmul_precision("highest"):
        got = np.asarray(ulysses.replicated_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                                      kv_mask=jnp.asarray(mask), causal=True))
        full = np.asarray(ulysses.replicated_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                                       kv_mask=jnp.asarray(mask)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(full - want).max() > 1e-2
