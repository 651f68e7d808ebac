"""Masked Ulysses attention (self, cross, joint text+video) under SP x TP on 8 fake CPU devices, printed as one JSON
object: each variant against a float64 numpy softmax with an explicit boolean mask, the reference's own fp32 error
next to it, the all-to-all count of the masked joint call, and the (Sq, Sk)-sized values of masked 720p calls
(traced under the mesh, never run).
"""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core import attention as att  # noqa: E402
from vidax_core.attention import ulysses  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402

MESHES = ((1, 4, 1), (1, 2, 2), (2, 2, 2))  # (dp, sp, tp)


def reference(q, k, v, vis, dtype=np.float64):
    """Softmax attention under the (B, Sq, Sk) bool ``vis``; a row that sees no key averages v over all keys."""
    q, k, v = (np.asarray(x, dtype) for x in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / dtype(np.sqrt(q.shape[-1]))
    vis = np.broadcast_to(np.asarray(vis)[:, None], logits.shape)
    empty = ~vis.any(-1, keepdims=True)
    logits = np.where(vis | empty, logits * ~empty, dtype(-np.inf)).astype(dtype)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(dtype)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def dense(b, sq, sk, kv_mask=None, q_seg=None, kv_seg=None, causal=False, text=None):
    """The boolean mask from the definitions: key padding, segments, causal, MoT (text rows < ``text``)."""
    vis = np.ones((b, sq, sk), bool)
    if kv_mask is not None:
        vis &= np.asarray(kv_mask, bool)[:, None, :]
    if q_seg is not None:
        vis &= np.asarray(q_seg)[:, :, None] == np.asarray(kv_seg)[:, None, :]
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    if causal:
        vis &= j <= i
    if text is not None:
        vis &= ~((i < text) & ((j >= text) | (j > i)))
    return vis


def masked_checks(out: dict) -> None:
    rng = np.random.default_rng(0)
    B, S, L, H, D = 2, 16, 6, 8, 4
    mk = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    q, k, v = mk(B, S, H, D), mk(B, S, H, D), mk(B, S, H, D)
    tq, tk, tv = mk(B, L, H, D), mk(B, L, H, D), mk(B, L, H, D)
    kv_mask = rng.random((B, S)) < 0.7
    kv_mask[1, :3] = False  # left padding: the first causal rows of batch row 1 see nothing
    seg = np.stack([np.arange(S) >= 5, np.arange(S) >= 11]).astype(np.int32)  # two packed samples per row
    lengths = np.array([S - 3, S], np.int32)
    txt_mask = np.stack([np.arange(L) < 4, np.arange(L) < 1])  # right-padded text (4 and 1 valid tokens)
    t_len = np.array([3, L], np.int32)
    jq, jk, jv = (np.concatenate([a, b], 1) for a, b in ((tq, q), (tk, k), (tv, v)))
    j_mask = np.concatenate([txt_mask, np.ones((B, S), bool)], 1)

    # name -> (function of the sharded arrays, q, k, v for the reference, dense mask, output slice)
    full = lambda sq, sk: np.ones((B, sq, sk), bool)  # noqa: E731
    cases = {
        "self_plain": (lambda s, t: ulysses.self_attention(*s), (q, k, v), full(S, S), None),
        "cross_plain": (lambda s, t: ulysses.cross_attention(s[0], t[1], t[2]), (q, tk, tv), full(S, L), None),
        "joint_plain": (lambda s, t: ulysses.joint_attention(t, s), (jq, jk, jv), full(L + S, L + S), "joint"),
        "self_causal_mask": (lambda s, t: ulysses.self_attention(*s, kv_mask=kv_mask, causal=True),
                             (q, k, v), dense(B, S, S, kv_mask, causal=True), None),
        "self_prefix_mask": (lambda s, t: ulysses.self_attention(*s, kv_mask=kv_mask, causal_prefix=5),
                             (q, k, v), dense(B, S, S, kv_mask, text=5), None),
        "self_segments_lengths": (lambda s, t: ulysses.self_attention(*s, q_segment_ids=seg, kv_segment_ids=seg,
                                                                      kv_lengths=lengths),
                                  (q, k, v), dense(B, S, S, np.arange(S)[None] < lengths[:, None], seg, seg), None),
        "cross_lengths_segments": (
            lambda s, t: ulysses.cross_attention(s[0], t[1], t[2], kv_lengths=t_len, q_segment_ids=seg,
                                                 kv_segment_ids=np.array([[0, 0, 1, 1, 1, 1]] * B, np.int32)),
            (q, tk, tv), dense(B, S, L, np.arange(L)[None] < t_len[:, None], seg,
                               np.array([[0, 0, 1, 1, 1, 1]] * B)), None),
        "joint_text_mask": (lambda s, t: ulysses.joint_attention(t, s, txt_mask=txt_mask),
                            (jq, jk, jv), dense(B, L + S, L + S, j_mask), "joint"),
        "joint_mot": (lambda s, t: ulysses.joint_attention(t, s, txt_mask=txt_mask, text_causal=True),
                      (jq, jk, jv), dense(B, L + S, L + S, j_mask, text=L), "joint"),
        "joint_causal": (lambda s, t: ulysses.joint_attention(t, s, txt_mask=txt_mask, causal=True),
                         (jq, jk, jv), dense(B, L + S, L + S, j_mask, causal=True), "joint"),
    }
    for dp, spn, tp in MESHES:
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=spn))
        name = f"dp{dp}_sp{spn}_tp{tp}"
        res = {}
        for backend in ("xla", "blockwise"):
            with att.use_backend(backend), sharding.activate(mesh, sharding.DEFAULT_RULES) as ctx:
                seq = ctx.sharding(("batch", "seq", "heads"))
                rep = ctx.sharding(("batch", None, "heads"))
                s_arr = tuple(jax.device_put(a, seq) for a in (q, k, v))
                t_arr = tuple(jax.device_put(a, rep) for a in (tq, tk, tv))
                for case, (fn, ref_in, vis, part) in cases.items():
                    got = jax.jit(lambda s, t, fn=fn: fn(s, t))(s_arr, t_arr)  # fresh: the backend is read at trace
                    ref = reference(*ref_in, vis)
                    noise = max(rel(reference(*ref_in, vis, np.float32), ref), 1e-7)
                    if part == "joint":
                        err = max(rel(got[0], ref[:, :L]), rel(got[1], ref[:, L:]))
                        spec = str(got[1].sharding.spec)
                    else:
                        err, spec = rel(got, ref), str(got.sharding.spec)
                    unmasked = rel(reference(*ref_in, np.ones_like(vis)), ref)
                    res[f"{backend}/{case}"] = {"err": err, "noise": noise, "unmasked": unmasked, "spec": spec}
                if backend == "xla":
                    f = jax.jit(lambda s, t: ulysses.joint_attention(t, s, txt_mask=txt_mask, text_causal=True))
                    hlo = f.lower(s_arr, t_arr).compile().as_text()
                    res["joint_mot_all_to_all"] = len(re.findall(r"all-to-all\(", hlo))
        out[f"masks_{name}"] = res


def _values(jaxpr):
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


def sq_by_sk(fn, args, sq, sk):
    """Values (inside shard_map bodies and scans too) with two dims >= Sq, >= Sk, or >= Sq*Sk/8 elements."""
    bad = []
    for prim, aval in _values(jax.make_jaxpr(fn)(*args).jaxpr):
        dims = list(aval.shape)
        two = any(a >= sq and b >= sk for i, a in enumerate(dims) for j, b in enumerate(dims) if i != j)
        if two or int(np.prod(dims)) * 8 >= sq * sk:
            bad.append(f"{prim}{tuple(dims)}")
    return bad


def memory_checks(out: dict) -> None:
    s_vid, s_txt, h, d = 21 * 45 * 80, 120, 4, 64  # Wan 720p, 81 frames: 75,600 video tokens
    mesh = make_mesh(MeshPlan(dp=1, tp=2, sp=2))
    vid = jax.ShapeDtypeStruct((1, s_vid, h, d), jnp.float32)
    txt = jax.ShapeDtypeStruct((1, s_txt, h, d), jnp.float32)
    t_mask = jnp.ones((1, s_txt), bool)
    v_mask = jnp.ones((1, s_vid), bool)
    res = {}
    with att.use_backend("blockwise"), sharding.activate(mesh, sharding.DEFAULT_RULES):
        s = s_txt + s_vid
        res["joint_mot_text_mask"] = sq_by_sk(
            lambda t, x: ulysses.joint_attention((t, t, t), (x, x, x), txt_mask=t_mask, text_causal=True),
            (txt, vid), s, s)
        res["self_causal_mask"] = sq_by_sk(
            lambda x: ulysses.self_attention(x, x, x, kv_mask=v_mask, causal=True), (vid,), s_vid, s_vid)
        res["self_segments"] = sq_by_sk(
            lambda x: ulysses.self_attention(x, x, x, q_segment_ids=v_mask.astype(jnp.int32),
                                             kv_segment_ids=v_mask.astype(jnp.int32)), (vid,), s_vid, s_vid)
    with att.use_backend("xla"), sharding.activate(mesh, sharding.DEFAULT_RULES):  # the check does flag xla
        res["xla_joint_mot_text_mask"] = sq_by_sk(
            lambda t, x: ulysses.joint_attention((t, t, t), (x, x, x), txt_mask=t_mask, text_causal=True),
            (txt, vid), s_txt + s_vid, s_txt + s_vid)[:3]
    out["memory_720p"] = res


if __name__ == "__main__":
    result: dict = {}
    masked_checks(result)
    memory_checks(result)
    print(json.dumps(result))
