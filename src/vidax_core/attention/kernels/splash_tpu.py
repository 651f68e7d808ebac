"""TPU backend ``splash``: JAX's splash attention kernel (``jax.experimental.pallas.ops.tpu.splash_attention``,
what MaxText and maxdiffusion run), forward only, with block sizes from a measured table
(:mod:`vidax_core.attention.splash_blocks`) and masks described tile by tile so that the kernel skips the tiles a
mask never reads.

How a call reaches the kernel. The kernel takes (heads, S, D) per call, no softmax scale and sequence lengths that are
multiples of its tiles; it walks a grid (heads, query tiles, key steps) and reads, per step, which key tile to fetch
and whether the tile is empty (skipped: no copy, no matmul), partly visible (masked) or fully visible from small
integer tables in scalar memory (:class:`TileMask`). This module builds those tables itself, vectorised, instead of
the kernel's own per-block Python loop over a dense mask, so that 100k-token sequences cost nothing to describe:

* every row lists its non-empty key tiles first (the grid's key axis is as long as the longest row: a row of a
  sparse mask costs only its own tiles); a row's empty steps repeat its last tile (no copy is made for them);
* a partly visible tile is masked either by a function of (query code, key position) the kernel evaluates
  (``mask_function``: key padding and causal masks here) or by one of a table of (block_q, block_kv) boolean
  patterns (``patterns``: NABLA's blocks and the 3-D neighbourhoods, :mod:`.splash_nabla`, :mod:`.splash_neighborhood`);
* the tables stay within :data:`SMEM_BUDGET` bytes per kernel call (the v5e's scalar memory is 1 MiB): a call that
  would need more runs as a loop over query ranges (and heads, for per-head masks) inside the program.

The dense backend (:func:`attention`) follows the shared semantics (:mod:`vidax_core.attention`): queries are scaled
by 1/sqrt(D) before the kernel (in float32, then rounded to the input dtype: one rounding that the XLA backend does
not make), padded keys are masked by a mask function, ``kv_mask`` and segment ids travel as the kernel's segment ids
(a key mask as id 0 against queries' 1), a causal mask is the mask function ``k <= q`` with the tiles above the
diagonal skipped, ``causal_prefix`` splits the rows (``_common.split_at_causal_limit``), and rows that see no key are
filled afterwards (``_common.fill_rows_without_keys``). head_dim 64 runs unpadded (the kernel takes the full head
dim as its lane width); other head dims that are not multiples of 128 are zero-padded to one.

``interpret=True`` runs the kernel in Pallas' interpreter (any platform, slow; the tests' path).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.attention import splash_blocks
from vidax_core.attention.kernels._common import (causal_limit, fill_rows_without_keys, pad_axis, round_up,
                                                  split_at_causal_limit)

LANES = 128
SMEM_BUDGET = 256 * 1024  # bytes of the per-step tables one kernel call may hold (a v5e has 1 MiB of scalar memory)
VMEM_BUDGET = 12 * 2**20  # bytes of tiles one grid step may hold: 3/4 of the 16 MiB of vector memory a kernel gets by
# default on v4/v5e (the compiler refuses a kernel past it: "CompileTimeScopedVmemOom")
UNPADDED_HEAD_DIMS = (64,)  # head dims below a multiple of 128 that run unpadded


def import_error() -> str | None:
    """None when the splash kernel can be imported and called the way this module calls it, else why not."""
    try:
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as mi

        fields = set(mi.MaskInfo._fields)
        need = {"data_next", "mask_next", "block_mask", "partial_mask_blocks", "q_sequence"}
        if not need <= fields or not hasattr(sk, "SplashAttentionKernel"):
            return f"jax {jax.__version__}'s splash attention has another interface (MaskInfo fields {sorted(fields)})"
    except Exception as e:  # ImportError, or anything a moved/renamed module raises on import
        return f"jax.experimental.pallas.ops.tpu.splash_attention is not importable in jax {jax.__version__}: {e}"
    return None


@dataclass(frozen=True)
class TileMask:
    """Which key tiles each query tile reads, compacted: (heads or 1, query tiles, width) integer tables.

    ``data_next``: the key tile each step fetches; ``block_mask``: 0 skip, 1 partly visible, 2 fully visible;
    ``mask_next``: for partly visible steps, the pattern (index into the call's patterns), else None.
    """

    data_next: Any
    block_mask: Any
    mask_next: Any = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.data_next.shape)  # type: ignore[return-value]

    def bytes_per_entry(self) -> int:
        return sum(np.dtype(a.dtype).itemsize for a in (self.data_next, self.block_mask, self.mask_next)
                   if a is not None)


def _argsort_stable(xp, a, axis=-1):
    return np.argsort(a, axis=axis, kind="stable") if xp is np else jnp.argsort(a, axis=axis, stable=True)


def compact(state, pattern=None, *, keys=None, width: int | None = None, xp=np) -> TileMask:
    """Candidate tiles per query tile -> a :class:`TileMask` whose rows list their non-empty key tiles first.

    ``state`` (heads or 1, query tiles, m): 0 skip, 1 partial, 2 full, for candidate ``j`` of each row, which is key
    tile ``keys[..., j]`` (default ``j``: every key tile a candidate, in order; given keys must ascend along a row);
    ``pattern``: the partial candidates' pattern ids. ``width``: the grid's key steps (default: the longest row;
    static masks only). numpy in, numpy out (``xp=np``, a constant of the program), or traced (``xp=jnp``: a mask
    made from the call's inputs, ``width`` then required)."""
    m = state.shape[-1]
    order = _argsort_stable(xp, state == 0)  # non-empty candidates first, in key order
    count = (state > 0).sum(-1, keepdims=True)
    if width is None:
        if xp is not np:
            raise ValueError("compact: a traced mask needs a static width")
        width = max(int(count.max()), 1)
    width = min(width, m)
    order = order[..., :width]
    st = xp.take_along_axis(state, order, axis=-1)
    tile = order if keys is None else xp.take_along_axis(xp.broadcast_to(keys, state.shape), order, axis=-1)
    steps = xp.arange(width)[None, None, :]
    last = xp.take_along_axis(tile, xp.clip(count - 1, 0, None), axis=-1)  # a row's last tile
    data = xp.where(steps < count, tile, last)
    top = m if keys is None else int(np.max(keys)) + 1 if xp is np else None
    small = np.int16 if top is not None and top < np.iinfo(np.int16).max else np.int32
    mnext = None
    if pattern is not None:
        pat = xp.where(st == 1, xp.take_along_axis(xp.broadcast_to(pattern, state.shape), order, axis=-1), 0)
        mnext = pat.astype(np.int32)
    return TileMask(data.astype(small), xp.where(steps < count, st, 0).astype(np.int8), mnext)


def _shrink_mask_dtype(mask: TileMask, patterns: int) -> TileMask:
    if mask.mask_next is None or patterns >= np.iinfo(np.int16).max:
        return mask
    return TileMask(mask.data_next, mask.block_mask, mask.mask_next.astype(np.int16))


def _splash_kernel(info, blocks: splash_blocks.Blocks, mask_function, interpret: bool):
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk

    sizes = sk.BlockSizes(block_q=blocks.block_q, block_kv=blocks.block_kv, block_kv_compute=blocks.block_kv_compute)
    return sk.SplashAttentionKernel(info, None, None, block_sizes=sizes, is_mqa=False, save_residuals=False,
                                    mask_value=sk.DEFAULT_MASK_VALUE, attn_logits_soft_cap=None,
                                    residual_checkpoint_name=None, mask_function=mask_function, interpret=interpret)


def run(q: jax.Array, k: jax.Array, v: jax.Array, mask: TileMask, blocks: splash_blocks.Blocks, *,
        patterns: jax.Array | None = None, mask_function: Callable | None = None, q_codes: Any = None,
        segment_ids: tuple[jax.Array, jax.Array] | None = None, interpret: bool = False) -> jax.Array:
    """The kernel over (N, Sq, D) q and (N, Sk, D) k / v (N heads, already scaled, Sq / Sk multiples of the tiles)
    under ``mask`` (first dim 1: every head; N: one mask per head), partial tiles masked by ``patterns`` (P, block_q,
    block_kv) bool via ``mask.mask_next`` or by ``mask_function(q_codes[i], key position)``. ``segment_ids``: (Sq,),
    (Sk,) int32 for every head. Runs as a loop over query ranges (and heads) when the tables exceed
    :data:`SMEM_BUDGET`. Returns (N, Sq, D) in q's dtype."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as mi

    n, sq, _ = q.shape
    hm, nq, width = mask.shape
    bq = blocks.block_q
    if sq != nq * bq or k.shape[1] % blocks.block_kv:
        raise ValueError(f"splash run: Sq={sq}, Sk={k.shape[1]} are not the mask's {nq} tiles of {bq} and whole "
                         f"key tiles of {blocks.block_kv}")
    mask = _shrink_mask_dtype(mask, 0 if patterns is None else int(patterns.shape[0]))
    per_row = width * mask.bytes_per_entry()  # bytes of one query tile's tables, per mask head
    q_tiles = max(1, min(nq, SMEM_BUDGET // per_row))  # query tiles per call
    heads = n
    if hm > 1:  # one mask per head: as many heads per call as the budget holds, a divisor of n
        heads = max(1, min(n, SMEM_BUDGET // (per_row * q_tiles)))
        heads = max(h for h in range(1, heads + 1) if n % h == 0)
    codes = None if q_codes is None else jnp.asarray(q_codes, jnp.int32)

    def call(qc, kc, vc, dn, bm, mn, codes_c, seg_q):
        info = mi.MaskInfo(data_next=dn, mask_next=mn, block_mask=bm, partial_mask_blocks=patterns,
                           q_sequence=codes_c, is_dynamic_mask=patterns is not None or None)
        kern = _splash_kernel(info, blocks, mask_function, interpret)
        seg = None if segment_ids is None else sk.SegmentIds(q=seg_q, kv=segment_ids[1])
        return kern(qc, kc, vc, seg)

    mn_all = mask.mask_next
    if q_tiles == nq and heads == n:
        return call(q, k, v, mask.data_next, mask.block_mask, mn_all, codes,
                    None if segment_ids is None else segment_ids[0])
    # A loop over (head group, query range) chunks: one kernel in the loop body, the tables sliced per chunk.
    nqc, hg = -(-nq // q_tiles), n // heads
    tabs = [mask.data_next, mask.block_mask] + ([mn_all] if mn_all is not None else [])
    pad_rows = nqc * q_tiles - nq
    tabs = [jnp.pad(jnp.asarray(t), ((0, 0), (0, pad_rows), (0, 0))) for t in tabs]  # padded rows: skipped
    q = pad_axis(q, 1, nqc * q_tiles * bq)
    codes_p = None if codes is None else pad_axis(codes, 0, nqc * q_tiles * bq)
    seg_q = None if segment_ids is None else pad_axis(segment_ids[0], 0, nqc * q_tiles * bq)

    def chunk(_, idx):
        g, c = idx // nqc, idx % nqc
        h0, r0 = g * heads, c * q_tiles
        qc = jax.lax.dynamic_slice_in_dim(jax.lax.dynamic_slice_in_dim(q, h0, heads, 0), r0 * bq, q_tiles * bq, 1)
        kc = jax.lax.dynamic_slice_in_dim(k, h0, heads, 0)
        vc = jax.lax.dynamic_slice_in_dim(v, h0, heads, 0)
        th = [jax.lax.dynamic_slice_in_dim(t, h0, heads, 0) if hm > 1 else t for t in tabs]
        th = [jax.lax.dynamic_slice_in_dim(t, r0, q_tiles, 1) for t in th]
        cc = None if codes_p is None else jax.lax.dynamic_slice_in_dim(codes_p, r0 * bq, q_tiles * bq, 0)
        sc = None if seg_q is None else jax.lax.dynamic_slice_in_dim(seg_q, r0 * bq, q_tiles * bq, 0)
        return None, call(qc, kc, vc, th[0], th[1], th[2] if len(th) > 2 else None, cc, sc)

    _, out = jax.lax.scan(chunk, None, jnp.arange(hg * nqc, dtype=jnp.int32))  # (hg * nqc, heads, rows, D)
    out = out.reshape(hg, nqc, heads, q_tiles * bq, -1).transpose(0, 2, 1, 3, 4)
    return out.reshape(n, nqc * q_tiles * bq, -1)[:, :sq]


# --- the dense backend ------------------------------------------------------------------------------------------


def tiles_for(kind: str, sq: int, sk: int, d: int, dtype: Any, blocks: splash_blocks.Blocks | None = None
              ) -> splash_blocks.Blocks:
    """The call's tiles: the table's (or the given) blocks, shrunk to the sequences (a short text sequence is one
    key tile), block_kv_compute dividing block_kv."""
    b = blocks if blocks is not None else splash_blocks.lookup(kind, sq, sk, d, dtype)[0]
    bq = min(b.block_q, round_up(sq, LANES))
    bkv = min(b.block_kv, round_up(sk, LANES))
    bkc = min(b.block_kv_compute, bkv)
    itemsize = jnp.dtype(dtype).itemsize
    while vmem_bytes(bq, bkv, bkc, head_dim_padded(d), itemsize) > VMEM_BUDGET and max(bq, bkv) > LANES:
        if bkv >= bq:  # wide heads (a VAE's one head of 512-1024 channels): halve the larger tile until it fits
            bkv = max(LANES, bkv // 2 // LANES * LANES)
            bkc = min(bkc, bkv)
        else:
            bq = max(LANES, bq // 2 // LANES * LANES)
    while bkv % bkc:
        bkc -= LANES
    return splash_blocks.Blocks(bq, bkv, bkc)


def vmem_bytes(bq: int, bkv: int, bkc: int, d: int, itemsize: int) -> int:
    """What one grid step of the kernel holds in vector memory (an estimate from its buffers): the q, k, v and out
    tiles double-buffered, the float32 output accumulator, and float32 logits and probabilities of one compute slice
    (with one spare)."""
    return 2 * itemsize * d * (2 * bq + 2 * bkv) + 4 * bq * d + 3 * 4 * bq * bkc + 2 * 4 * bq * LANES


def head_dim_padded(d: int) -> int:
    return d if d in UNPADDED_HEAD_DIMS or d % LANES == 0 else round_up(d, LANES)


def dense_tile_state(sq_pad: int, sk: int, sk_pad: int, bq: int, bkv: int, causal: bool) -> np.ndarray:
    """(1, query tiles, key tiles) state of key padding and a causal mask: 0 skip, 1 partial, 2 full."""
    q0 = np.arange(0, sq_pad, bq)[:, None]
    k0 = np.arange(0, sk_pad, bkv)[None, :]
    state = np.where(k0 + bkv <= sk, 2, np.where(k0 < sk, 1, 0))
    if causal:
        q1 = q0 + bq - 1  # a tile's last query row
        state = np.where(k0 > q1, 0, np.where(k0 + bkv - 1 <= q0, state, np.minimum(state, 1)))
    return np.broadcast_to(state, (sq_pad // bq, sk_pad // bkv))[None].astype(np.int32)


@functools.lru_cache(maxsize=64)
def dense_mask_function(sk: int | None, causal: bool) -> Callable:
    """The kernel's per-element mask on partial tiles: key ``k < sk`` (padding; None: no padding) and, causal, ``k <=
    q``; ``q`` is the query position (the call's codes). One function object per (sk, causal): jit caches hold."""

    def visible(q, k):
        ok = None if sk is None else k < sk
        if causal:
            ok = k <= q if ok is None else jnp.logical_and(ok, k <= q)
        return ok

    return visible


def attention(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None,
              q_segment_ids: jax.Array | None = None, kv_segment_ids: jax.Array | None = None, causal: bool = False,
              causal_prefix: int | None = None, blocks: splash_blocks.Blocks | None = None,
              interpret: bool = False) -> jax.Array:
    """The ``splash`` backend: (B, S, H, D) in, (B, Sq, H, D) in ``v.dtype`` out (see the module docstring)."""
    limit = causal_limit(q.shape[1], k.shape[1], causal, causal_prefix)

    def one(q, k, v, kv_mask, q_seg, kv_seg, is_causal):
        return _dense(q, k, v, kv_mask, q_seg, kv_seg, is_causal, blocks, interpret)

    out = split_at_causal_limit(one, q, k, v, kv_mask, q_segment_ids, kv_segment_ids, limit)
    return fill_rows_without_keys(out.astype(v.dtype), v, kv_mask, q_segment_ids, kv_segment_ids, limit)


def scaled_heads_first(x: jax.Array, s_pad: int, d_pad: int, scale: float | None = None) -> jax.Array:
    """(B, S, H, D) -> (B, H, S_pad, D_pad), optionally times ``scale`` (in float32, rounded back)."""
    if scale is not None:
        x = (x.astype(jnp.float32) * np.float32(scale)).astype(x.dtype)
    return jnp.transpose(pad_axis(pad_axis(x, 1, s_pad), 3, d_pad), (0, 2, 1, 3))


def _dense(q, k, v, kv_mask, q_segment_ids, kv_segment_ids, causal, blocks, interpret):
    b, sq, h, d = q.shape
    sk = k.shape[1]
    t = tiles_for("dense", sq, sk, d, q.dtype, blocks)
    sq_pad, sk_pad, d_pad = round_up(sq, t.block_q), round_up(sk, t.block_kv), head_dim_padded(d)
    state = dense_tile_state(sq_pad, sk, sk_pad, t.block_q, t.block_kv, causal)
    mask = compact(state)
    partial = bool((state == 1).any())
    fn = dense_mask_function(sk if sk_pad != sk else None, causal) if partial else None
    codes = np.arange(sq_pad, dtype=np.int32) if partial else None
    qt = scaled_heads_first(q, sq_pad, d_pad, 1.0 / math.sqrt(d))
    kt, vt = scaled_heads_first(k, sk_pad, d_pad), scaled_heads_first(v, sk_pad, d_pad)
    if kv_mask is None and q_segment_ids is None:  # batch folded into heads: one kernel call
        out = run(qt.reshape(b * h, sq_pad, d_pad), kt.reshape(b * h, sk_pad, d_pad), vt.reshape(b * h, sk_pad, d_pad),
                  mask, t, mask_function=fn, q_codes=codes, interpret=interpret).reshape(b, h, sq_pad, d_pad)
    else:
        key_ok = jnp.ones((b, sk), bool) if kv_mask is None else kv_mask.astype(bool)
        if q_segment_ids is None:
            q_seg, kv_seg = jnp.ones((b, sq), jnp.int32), key_ok.astype(jnp.int32)  # 0 never matches a query's 1
        else:
            q_seg = q_segment_ids.astype(jnp.int32)
            kv_seg = jnp.where(key_ok, kv_segment_ids.astype(jnp.int32), jnp.min(q_seg) - 1)  # hidden: no query's id
        q_seg, kv_seg = pad_axis(q_seg, 1, sq_pad), pad_axis(kv_seg, 1, sk_pad)

        def per_batch(args):  # one batch entry's heads per call: the segment ids are per sequence
            qb, kb, vb, sq_b, sk_b = args
            return run(qb, kb, vb, mask, t, mask_function=fn, q_codes=codes, segment_ids=(sq_b, sk_b),
                       interpret=interpret)

        out = jax.lax.map(per_batch, (qt, kt, vt, q_seg, kv_seg))
    return jnp.transpose(out, (0, 2, 1, 3))[:, :sq, :, :d]


def limit_tile_state(limits: np.ndarray, sk_pad: int, bq: int, bkv: int) -> np.ndarray:
    """(1, query tiles, key tiles) state of rows that see only their first ``limits[i]`` keys: a
    tile is skipped past every row's limit, fully visible below every row's, partial otherwise."""
    rows = limits.reshape(-1, bq)
    lo, hi = rows.min(axis=1)[:, None], rows.max(axis=1)[:, None]
    k0 = np.arange(0, sk_pad, bkv)[None, :]
    state = np.where(k0 >= hi, 0, np.where(k0 + bkv <= lo, 2, 1))
    return state[None].astype(np.int32)


@functools.lru_cache(maxsize=8)
def limit_mask_function() -> Callable:
    """The kernel's per-element mask of :func:`limited_attention`: key ``k`` is visible below the row's code, its
    key limit."""
    return lambda q, k: k < q


def limited_attention(q: jax.Array, k: jax.Array, v: jax.Array, runs: tuple[tuple[int, int], ...], *,
                      blocks: splash_blocks.Blocks | None = None, interpret: bool = False) -> jax.Array:
    """Attention whose query rows come in ``runs`` of ``(rows, keys)``: the rows of a run see the first ``keys``
    keys (a chunk-causal mask over a cached prefix). One kernel call: key tiles past every row's limit are skipped,
    tiles straddling a limit are masked by :func:`limit_mask_function` with each row's limit as its code. (B, S, H,
    D) in, (B, Sq, H, D) in ``v.dtype`` out."""
    b, sq, h, d = q.shape
    sk = k.shape[1]
    t = tiles_for("dense", sq, sk, d, q.dtype, blocks)
    sq_pad, sk_pad, d_pad = round_up(sq, t.block_q), round_up(sk, t.block_kv), head_dim_padded(d)
    limits = np.zeros(sq_pad, np.int32)
    limits[:sq] = np.repeat([n for _, n in runs], [r for r, _ in runs])
    limits[sq:] = limits[sq - 1]  # padded rows (discarded) read what the last row reads: no extra partial tile
    state = limit_tile_state(limits, sk_pad, t.block_q, t.block_kv)
    fn = limit_mask_function() if bool((state == 1).any()) else None
    qt = scaled_heads_first(q, sq_pad, d_pad, 1.0 / math.sqrt(d)).reshape(b * h, sq_pad, d_pad)
    kt = scaled_heads_first(k, sk_pad, d_pad).reshape(b * h, sk_pad, d_pad)
    vt = scaled_heads_first(v, sk_pad, d_pad).reshape(b * h, sk_pad, d_pad)
    out = run(qt, kt, vt, compact(state), t, mask_function=fn, q_codes=limits if fn is not None else None,
              interpret=interpret)
    return jnp.transpose(out.reshape(b, h, sq_pad, d_pad), (0, 2, 1, 3))[:, :sq, :, :d].astype(v.dtype)


def describe(q_shape, k_shape, dtype, blocks: splash_blocks.Blocks | None = None) -> str:
    """The tiles a dense call of these shapes runs with, as recorded in the metrics (``512x1024/512``)."""
    return str(tiles_for("dense", q_shape[1], k_shape[1], q_shape[3], dtype, blocks))
