"""The splash attention backend on this chip: numerics against XLA, speed against the old Pallas kernel per family
shape, and the block-size sweep that writes the tuning table.

  python benchmarks/splash_tune.py OUT_DIR [--budget S] [--repeats 3] [--heads 8] [--only numerics,sweep,...]
  python benchmarks/splash_tune.py OUT_DIR --cpu-check        (tiny shapes, the kernels interpreted, on CPU)

Parts, in order, each row timed (first call = compile + run, then the median of ``--repeats`` calls):

* ``numerics``: splash against the XLA reference attention (einsum, float32 softmax, matmuls at ``highest``) at
  4096 tokens, bf16 and float32 inputs, for each mask kind (plain, key lengths of a text cross-attention, a joint
  text + video sequence with padded text, causal, NABLA blocks, 3-D neighbourhoods), head_dim 128 and 64; the old
  ``pallas_tpu`` kernel beside it as the yardstick. Bounds (relative L2 of the output): 2e-2 bf16, 1e-3 float32.
* ``sweep``: block sizes (block_q, block_kv, block_kv_compute) per (sequence, head_dim) of the families' video
  self-attention; NABLA's tiles at Kandinsky 5 Pro's sequence (a realistic sparsity: its STA window plus top
  blocks); the neighbourhood brick volume at the LTX-2.5 decoder's stage-5 windows. The best of each is written to
  ``OUT_DIR/splash_blocks.json`` (the format of ``src/vidax_core/attention/splash_blocks.json``: copy it there to
  ship the measurement), which the next parts use.
* ``families``: each family's attention call at its reference shape (batch 1, ``--heads`` heads: per-head cost
  does not depend on the count), splash with the table's blocks against ``pallas_tpu``: seconds, TFLOP/s, MFU
  (sparse: of the tiles computed, and the dense-equivalent speedup).

Writes OUT_DIR/splash.json (every row; ``--name`` renames it), splash.md and splash_blocks.json; stops starting
rows when ``--budget`` seconds are spent (the rows not run are listed). Exit 1 when a numerics row is out of bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable

import numpy as np

BOUNDS = {"bfloat16": 2e-2, "float32": 1e-3}
DENSE_CANDIDATES = [(512, 512, 512), (512, 1024, 512), (1024, 512, 512), (1024, 1024, 512), (1024, 1024, 1024),
                    (2048, 1024, 512), (256, 2048, 512)]
NABLA_TILES = [(64, 512, 512), (128, 256, 256), (256, 128, 128), (384, 128, 128)]
BRICK_VOLUMES = [256, 512, 1024]

# (name, sequence, heads at the reference size, head_dim, mask) of each family's video attention; text: 226 / 512
FAMILIES = [
    ("wan2.1-14b 480p self", 32760, 40, 128, None),
    ("wan2.1-14b 720p self", 75600, 40, 128, None),
    ("wan2.1-14b 720p cross", (75600, 512), 40, 128, "lengths"),
    ("wan2.2-5b self", 27280, 24, 128, None),
    ("cogvideox-5b joint", 17550 + 226, 48, 64, "joint"),
    ("cogvideox1.5-5b joint", 44880 + 226, 48, 64, "joint"),
    ("ltx-video-13b self", 11760, 32, 128, None),
    ("kandinsky5-lite self", 47616, 14, 128, None),
    ("hunyuanvideo-1.5 720p self", 111600, 16, 128, None),
    ("kandinsky5-pro nabla", 95232, 32, 128, "nabla"),
    ("ltx-2.5 decoder stage 5 (33 of 121 frames)", (33, 128, 192), 4, 64, "neighborhood"),
]
SWEEP_DENSE = [(11760, 128), (32760, 128), (75600, 128), (17776, 64), (45106, 64)]
NABLA_GRID, NABLA_WINDOW = (31, 12, 16), (11, 3, 3)  # Kandinsky 5 Pro 768x1024x121: 31 x 12 x 16 blocks of 64
NB_GRID, NB_KERNEL = (33, 128, 192), (11, 11, 11)


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds
        self.skipped: list[str] = []

    def left(self) -> float:
        return self.end - time.monotonic()

    def ok(self, name: str, need: float = 5.0) -> bool:
        if self.left() < need:
            self.skipped.append(name)
            return False
        return True


def timed(fn: Callable, args: tuple, repeats: int) -> tuple[float, float]:
    """(first call s: compile + run, median of ``repeats`` further calls s)."""
    import jax

    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def rel_l2(a, b) -> float:
    a, b = (np.asarray(x, np.float64) for x in (a, b))
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def qkv(rng, b, sq, sk, h, d, dtype):
    import jax.numpy as jnp

    shapes = [(b, sq, h, d), (b, sk, h, d), (b, sk, h, d)]
    return [jnp.asarray(rng.standard_normal(s).astype(np.float32), dtype) for s in shapes]


def masks(kind: str | None, b: int, sq: int, sk: int, text: int = 226) -> dict:
    """The call's mask keywords: text key lengths (cross), padded text in front of video (joint), causal."""
    import jax.numpy as jnp

    if kind == "lengths":
        return {"kv_lengths": jnp.full((b,), min(sk, 100), jnp.int32)}
    if kind == "joint":
        m = np.ones((b, sk), bool)
        m[:, 60:text] = False  # 60 real text tokens of the 226 the pipeline pads to
        return {"kv_mask": jnp.asarray(m)}
    if kind == "causal":
        return {"causal": True}
    return {}


def nabla_mask(rng, b, h, grid, window, extra: float = 0.08):
    """A NABLA block mask of realistic sparsity: the STA window plus ``extra`` of the blocks per row, random."""
    from vidax_core.attention.nabla import sta_mask

    n = int(np.prod(grid))
    keep = rng.random((b, h, n, n)) < extra
    return np.asarray(keep | sta_mask(tuple(grid), tuple(window))[None, None])


def flops(sq, sk, h, d, b=1, density=1.0) -> float:
    return 4.0 * b * h * sq * sk * d * density


# --- parts ---------------------------------------------------------------------------------------------------


def part_numerics(a, rows, budget, peak):
    import jax
    import jax.numpy as jnp

    from vidax_core.attention import einsum_attention
    from vidax_core.attention.kernels import pallas_tpu, splash_nabla, splash_neighborhood, splash_tpu
    from vidax_core.attention.kernels import neighborhood as nb_blockwise
    from vidax_core.attention.kernels import blockwise

    rng = np.random.default_rng(0)
    s = 512 if a.cpu_check else 4096
    heads = 2
    cases = [(d, kind, dtype) for d in (128, 64) for kind in (None, "lengths", "joint", "causal", "nabla",
                                                              "neighborhood") for dtype in ("bfloat16", "float32")]
    if a.cpu_check:  # the interpreter is slow: one case of each kernel
        cases = [(64, "joint", "bfloat16"), (128, "nabla", "float32"), (64, "neighborhood", "bfloat16")]
    for d, kind, dtype in cases:
        name = f"numerics {kind or 'plain'} d{d} {dtype}"
        if not budget.ok(name, 10):
            continue
        row: dict[str, Any] = {"part": "numerics", "name": name, "head_dim": d, "dtype": dtype,
                               "bound": BOUNDS[dtype]}
        try:
            if kind == "neighborhood":
                grid = (4, 8, 8) if a.cpu_check else (8, 16, 32)
                x = [jnp.asarray(rng.standard_normal((1, *grid, heads * d)).astype(np.float32), dtype)
                     for _ in range(3)]
                with jax.default_matmul_precision("highest"):
                    ref = nb_blockwise.attention(*(t.astype(jnp.float32) for t in x), (3, 5, 5), heads=heads)
                out = splash_neighborhood.attention(*x, (3, 5, 5), heads=heads)[0]
                old = nb_blockwise.attention(*x, (3, 5, 5), heads=heads)
            elif kind == "nabla":
                grid = (2, 2, 2) if a.cpu_check else (4, 4, 4)
                n = int(np.prod(grid))
                q, k, v = qkv(rng, 1, n * 64, n * 64, heads, d, dtype)
                m = jnp.asarray(nabla_mask(rng, 1, heads, grid, (1, 3, 3), 0.2))
                with jax.default_matmul_precision("highest"):
                    ref = blockwise.attention(*(t.astype(jnp.float32) for t in (q, k, v)), block_mask=m,
                                              mask_block=64, block_q=64, block_k=64)
                out = splash_nabla.attention(q, k, v, m, 64)
                old = blockwise.attention(q, k, v, block_mask=m, mask_block=64, block_q=512, block_k=512)
            else:
                sk = 512 if kind == "lengths" else s
                q, k, v = qkv(rng, 2, s, sk, heads, d, dtype)
                kw = masks(kind, 2, s, sk)
                if "kv_lengths" in kw:
                    kw = {"kv_mask": jnp.arange(sk)[None, :] < kw.pop("kv_lengths")[:, None]}
                with jax.default_matmul_precision("highest"):
                    ref = einsum_attention(*(t.astype(jnp.float32) for t in (q, k, v)), **kw)
                out = jax.jit(lambda q, k, v: splash_tpu.attention(q, k, v, **kw))(q, k, v)
                old = None if a.cpu_check else jax.jit(lambda q, k, v: pallas_tpu.attention(q, k, v, **kw))(
                    q, k, v)
            row["splash_rel_l2"] = rel_l2(out, ref)
            row["old_rel_l2"] = None if old is None else rel_l2(old, ref)
            row["within_bound"] = bool(np.isfinite(row["splash_rel_l2"]) and row["splash_rel_l2"] <= row["bound"])
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot run here is a result
            row["error"] = _err(exc)
            row["within_bound"] = False
        rows.append(row)
        _progress(row)


def part_sweep(a, rows, budget, peak, table):
    import jax

    from vidax_core.attention.kernels import splash_nabla, splash_neighborhood, splash_tpu
    from vidax_core.attention.splash_blocks import Blocks, chip

    rng = np.random.default_rng(1)
    heads = 2 if a.cpu_check else a.heads
    shapes = [(256, 64)] if a.cpu_check else SWEEP_DENSE
    cands = [(128, 128, 128), (256, 128, 128)] if a.cpu_check else DENSE_CANDIDATES
    for s, d in shapes:
        best = None
        for bq, bkv, bkc in cands:
            name = f"sweep dense s{s} d{d} {bq}x{bkv}/{bkc}"
            if not budget.ok(name, 20):
                continue
            q, k, v = qkv(rng, 1, s, s, heads, d, "bfloat16")
            blk = Blocks(bq, bkv, bkc)

            def dense(row, blk=blk, q=q, k=k, v=v):
                fn = jax.jit(lambda q, k, v: splash_tpu.attention(q, k, v, blocks=blk))
                row["first_s"], row["call_s"] = timed(fn, (q, k, v), a.repeats)
                _rates(row, flops(s, s, heads, d), peak)

            row = {"part": "sweep", "kind": "dense", "name": name, "q_len": s, "kv_len": s, "head_dim": d,
                   "heads": heads, "blocks": str(blk)}
            if run_row(rows, row, dense) and (best is None or row["call_s"] < best[0]):
                best = (row["call_s"], blk, row)
        if best is not None:
            table["entries"].append(_entry("dense", s, s, d, "bfloat16", best[1], best[2]))
    # NABLA tiles at Kandinsky 5 Pro's sequence, a realistic block mask
    grid = (2, 2, 2) if a.cpu_check else NABLA_GRID
    n = int(np.prod(grid))
    s = n * 64
    q, k, v = qkv(rng, 1, s, s, heads, 128, "bfloat16")
    m = nabla_mask(rng, 1, heads, grid, NABLA_WINDOW)
    best = None
    for bq, bkv, bkc in ([(128, 128, 128)] if a.cpu_check else NABLA_TILES):
        name = f"sweep nabla s{s} {bq}x{bkv}"
        if not budget.ok(name, 30):
            continue
        blk = Blocks(bq, bkv, bkc)

        def nabla(row, blk=blk):
            seen: list[float] = []
            fn = jax.jit(lambda q, k, v, m: splash_nabla.attention(q, k, v, m, 64, blocks=blk,
                                                                   on_density=_collect_density(seen)))
            row["first_s"], row["call_s"] = timed(fn, (q, k, v, m), a.repeats)
            jax.effects_barrier()
            row["tile_density"] = seen[-1] if seen else None
            _rates(row, flops(s, s, heads, 128, density=row["tile_density"] or 1.0), peak,
                   dense=flops(s, s, heads, 128))

        row = {"part": "sweep", "kind": "nabla", "name": name, "q_len": s, "kv_len": s, "head_dim": 128,
               "heads": heads, "blocks": str(blk), "block_density": float(m.mean())}
        if run_row(rows, row, nabla) and (best is None or row["call_s"] < best[0]):
            best = (row["call_s"], blk, row)
    if best is not None:
        table["entries"].append(_entry("nabla", s, s, 128, "bfloat16", best[1], best[2]))
    # neighbourhood bricks at the LTX-2.5 decoder's stage-5 windows
    grid, kernel = ((2, 8, 16), (3, 5, 5)) if a.cpu_check else (NB_GRID, NB_KERNEL)
    s = int(np.prod(grid))
    hn = 2 if a.cpu_check else 4
    x = [qkv(rng, 1, s, s, hn, 64, "bfloat16")[0].reshape(1, *grid, hn * 64) for _ in range(3)]
    best = None
    for vol in ([128] if a.cpu_check else BRICK_VOLUMES):
        brick = splash_neighborhood.choose_brick(grid, kernel, vol)
        name = f"sweep neighborhood {'x'.join(map(str, grid))} brick {'x'.join(map(str, brick))}"
        if not budget.ok(name, 30):
            continue
        def bricks(row, brick=brick, vol=vol):
            fn = jax.jit(lambda q, k, v: splash_neighborhood.attention(q, k, v, kernel, heads=hn, brick=brick)[0])
            row["first_s"], row["call_s"] = timed(fn, tuple(x), a.repeats)
            row["tile_density"] = splash_neighborhood.density(grid, kernel, brick)
            _rates(row, flops(s, s, hn, 64, density=row["tile_density"]), peak, dense=flops(s, s, hn, 64))
            row["window_share"] = math.prod(kernel) / (row["tile_density"] * s)  # of the pairs computed

        row = {"part": "sweep", "kind": "neighborhood", "name": name, "q_len": s, "kv_len": s, "head_dim": 64,
               "heads": hn, "brick": list(brick)}
        if run_row(rows, row, bricks) and (best is None or row["call_s"] < best[0]):
            best = (row["call_s"], Blocks(vol, vol, min(vol, 512), brick), row)
    if best is not None:
        table["entries"].append(_entry("neighborhood", s, s, 64, "bfloat16", best[1], best[2]))
    for e in table["entries"]:
        e["chip"] = chip()


def part_families(a, rows, budget, peak):
    import jax
    import jax.numpy as jnp

    from vidax_core.attention.kernels import blockwise, pallas_tpu, splash_nabla, splash_neighborhood, splash_tpu
    from vidax_core.attention.kernels import neighborhood as nb_blockwise
    from vidax_core.attention.nabla import blockwise_pairs
    from vidax_core.attention.neighborhood import blockwise_density

    rng = np.random.default_rng(2)
    fams = [("tiny joint", 300, 2, 64, "joint")] if a.cpu_check else FAMILIES
    for name, seq, h_ref, d, kind in fams:
        h = min(h_ref, 2 if a.cpu_check else a.heads)
        if kind == "neighborhood":
            grid, kernel = tuple(seq), ((3, 5, 5) if a.cpu_check else NB_KERNEL)
            sq = sk = int(np.prod(grid))
            args = tuple(jnp.asarray(rng.standard_normal((1, *grid, h * d)).astype(np.float32), jnp.bfloat16)
                         for _ in range(3))
            impls = {"splash": lambda q, k, v: splash_neighborhood.attention(q, k, v, kernel, heads=h)[0],
                     "blockwise": lambda q, k, v: nb_blockwise.attention(q, k, v, kernel, heads=h)}
        elif kind == "nabla":
            grid = (2, 2, 2) if a.cpu_check else NABLA_GRID
            sq = sk = int(np.prod(grid)) * 64
            q, k, v = qkv(rng, 1, sq, sk, h, d, "bfloat16")
            m = jnp.asarray(nabla_mask(rng, 1, h, grid, (1, 3, 3) if a.cpu_check else NABLA_WINDOW))
            impls = {"splash": lambda q, k, v, m=m: splash_nabla.attention(q, k, v, m, 64),
                     "blockwise": lambda q, k, v, m=m: blockwise.attention(q, k, v, block_mask=m, mask_block=64,
                                                                           block_q=512, block_k=512),
                     "splash dense": lambda q, k, v: splash_tpu.attention(q, k, v)}
            args = (q, k, v)
        else:
            sq, sk = seq if isinstance(seq, tuple) else (seq, seq)
            q, k, v = qkv(rng, 1, sq, sk, h, d, "bfloat16")
            kw = masks(kind, 1, sq, sk)
            impls = {"splash": lambda q, k, v, kw=kw: splash_tpu.attention(
                         q, k, v, **_kv_mask(kw, sk)),
                     "pallas_tpu": lambda q, k, v, kw=kw: pallas_tpu.attention(q, k, v, **_kv_mask(kw, sk))}
            if a.cpu_check:
                impls.pop("pallas_tpu")
            args = (q, k, v)
        for impl, fn in impls.items():
            row_name = f"{name}: {impl}"
            if not budget.ok(row_name, 30):
                continue
            row: dict[str, Any] = {"part": "families", "name": row_name, "family": name, "kernel": impl,
                                   "q_len": sq, "kv_len": sk, "heads": h, "head_dim": d, "mask": kind}

            def family(row, fn=fn, impl=impl, kind=kind, sq=sq, sk=sk, h=h, d=d, args=args):
                seen: list[float] = []
                if kind == "nabla" and impl == "splash":
                    def fn(q, k, v):
                        return splash_nabla.attention(q, k, v, m, 64, on_density=_collect_density(seen))

                row["first_s"], row["call_s"] = timed(jax.jit(fn), args, a.repeats)
                density = 1.0
                if kind == "nabla" and impl == "splash":
                    jax.effects_barrier()
                    density = seen[-1] if seen else 1.0
                elif kind == "nabla" and impl == "blockwise":
                    density = float(blockwise_pairs(m)) / (h * sq * sk)
                elif kind == "neighborhood":
                    brick = splash_neighborhood.tiles_for(grid, kernel, d, jnp.bfloat16).brick
                    row["brick"] = list(brick) if impl == "splash" else None
                    density = (splash_neighborhood.density(grid, kernel, brick) if impl == "splash"
                               else blockwise_density(grid, kernel, None))
                row["density"] = density
                _rates(row, flops(sq, sk, h, d, density=density), peak, dense=flops(sq, sk, h, d))

            run_row(rows, row, family)


# --- helpers --------------------------------------------------------------------------------------------------


def run_row(rows: list, row: dict, body: Callable[[dict], None]) -> bool:
    """``body(row)`` fills the row; an exception is the row's ``error`` (a kernel that cannot run here is a
    result). The row is kept and printed either way; True when it ran."""
    try:
        body(row)
        ok = True
    except Exception as exc:  # noqa: BLE001
        row["error"] = _err(exc)
        ok = False
    rows.append(row)
    _progress(row)
    return ok


def _kv_mask(kw: dict, sk: int) -> dict:
    import jax.numpy as jnp

    kw = dict(kw)
    if "kv_lengths" in kw:
        kw["kv_mask"] = jnp.arange(sk)[None, :] < kw.pop("kv_lengths")[:, None]
    return kw


def _rates(row: dict, computed: float, peak: float | None, dense: float | None = None) -> None:
    row["tflops_per_s"] = computed / row["call_s"] / 1e12
    row["mfu"] = computed / row["call_s"] / peak if peak else None
    if dense is not None and dense != computed:
        row["dense_equivalent_tflops_per_s"] = dense / row["call_s"] / 1e12
        row["sparse_work_ratio"] = dense / computed if computed else None


def _entry(kind, q_len, kv_len, head_dim, dtype, blk, row) -> dict:
    e = {"kind": kind, "q_len": int(q_len), "kv_len": int(kv_len), "head_dim": int(head_dim), "dtype": dtype,
         "block_q": blk.block_q, "block_kv": blk.block_kv, "block_kv_compute": blk.block_kv_compute,
         "call_ms": round(row["call_s"] * 1e3, 3), "tflops_per_s": round(row["tflops_per_s"], 2)}
    if blk.brick is not None:
        e["brick"] = list(blk.brick)
    return e


def _collect_density(seen: list) -> Callable:
    """A NABLA ``on_density`` that appends each run's measured density to ``seen`` (host callback)."""
    import jax

    return lambda c, dense: jax.debug.callback(lambda c: seen.append(float(c) / dense), c)


def _err(exc: Exception) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def _progress(row: dict) -> None:
    bits = [row["name"]]
    for k in ("call_s", "tflops_per_s", "mfu", "splash_rel_l2", "old_rel_l2", "error"):
        if row.get(k) is not None:
            v = row[k]
            bits.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    print(" | ".join(bits), file=sys.stderr, flush=True)


def markdown(rep: dict) -> str:
    lines = [f"splash attention on {rep['device']} (jax {rep['jax']}), {rep['wall_s']:.0f} s", ""]
    num = [r for r in rep["rows"] if r["part"] == "numerics"]
    if num:
        lines += ["| numerics | splash rel L2 | pallas_tpu / blockwise rel L2 | bound | ok |", "|---|---|---|---|---|"]
        lines += [f"| {r['name']} | {_f(r.get('splash_rel_l2'))} | {_f(r.get('old_rel_l2'))} | {r['bound']} | "
                  f"{'yes' if r.get('within_bound') else 'NO ' + r.get('error', '')} |" for r in num]
    for part in ("sweep", "families"):
        rs = [r for r in rep["rows"] if r["part"] == part]
        if rs:
            lines += ["", f"| {part} | first s | call s | TFLOP/s (computed) | MFU | dense-eq TFLOP/s |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {r['name']} | {_f(r.get('first_s'))} | {_f(r.get('call_s'))} | {_f(r.get('tflops_per_s'))} | "
                      f"{_pct(r.get('mfu'))} | {_f(r.get('dense_equivalent_tflops_per_s'))} |" if "error" not in r else
                      f"| {r['name']} | error: {r['error'][:150]} | | | | |" for r in rs]
    if rep["skipped"]:
        lines += ["", "not run (budget spent): " + "; ".join(rep["skipped"])]
    return "\n".join(lines) + "\n"


def _f(v) -> str:
    return "" if v is None else f"{v:.4g}"


def _pct(v) -> str:
    return "" if v is None else f"{v:.1%}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--budget", type=float, default=None, help="seconds: no row starts after them (default: "
                   "$CASE_LIMIT - 45, the case's timeout in benchmarks/accelerator.sh, else 310)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--heads", type=int, default=8, help="heads per call (per-head cost does not depend on them)")
    p.add_argument("--only", default="numerics,sweep,families")
    p.add_argument("--cpu-check", action="store_true", help="tiny shapes, kernels interpreted (any platform)")
    p.add_argument("--name", default="splash", help="the report's file name in OUT_DIR (.json, .md)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import jax

    from vidax_core.attention import splash_blocks
    from vidax_core.report.throughput import local_peak, peak_flops

    t0 = time.monotonic()
    limit = os.environ.get("CASE_LIMIT")
    budget = Budget(a.budget if a.budget is not None else (float(limit) - 45 if limit else 310.0))
    peak = peak_flops(local_peak(), "bfloat16")[0] if not a.cpu_check else None
    rows: list[dict] = []
    table = {"comment": f"measured by benchmarks/splash_tune.py on {jax.devices()[0].device_kind}",
             "defaults": splash_blocks.load()["defaults"], "entries": []}
    ctx = contextlib.nullcontext()
    if a.cpu_check:
        from jax.experimental.pallas import tpu as pltpu

        ctx = pltpu.force_tpu_interpret_mode()
    parts = [x.strip() for x in a.only.split(",") if x.strip()]
    with ctx:
        for part in parts:
            try:
                if part == "numerics":
                    part_numerics(a, rows, budget, peak)
                elif part == "sweep":
                    part_sweep(a, rows, budget, peak, table)
                    path = os.path.join(a.out, "splash_blocks.json")
                    with open(path, "w") as fh:
                        json.dump(table, fh, indent=1)
                    os.environ[splash_blocks.ENV] = path  # the families part runs the measured table
                    splash_blocks.load.cache_clear()
                elif part == "families":
                    part_families(a, rows, budget, peak)
                else:
                    raise SystemExit(f"error: unknown part {part!r} (numerics, sweep, families)")
            except Exception:  # noqa: BLE001 - a part that fails is recorded, the next one runs
                rows.append({"part": part, "name": f"{part} failed", "error": traceback.format_exc()[-600:]})
    rep = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__, "wall_s": time.monotonic() - t0,
           "rows": rows, "skipped": budget.skipped, "table": table}
    rep["markdown"] = markdown(rep)
    with open(os.path.join(a.out, f"{a.name}.json"), "w") as fh:
        json.dump(rep, fh, indent=1, default=str)
    with open(os.path.join(a.out, f"{a.name}.md"), "w") as fh:
        fh.write(rep["markdown"])
    print(rep["markdown"])
    bad = [r["name"] for r in rows if r["part"] == "numerics" and not r.get("within_bound")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
