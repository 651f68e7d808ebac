"""Which way of streaming block weights hides the host-to-device copy under the compute: a standalone JAX probe.

  python benchmarks/offload_strategies.py OUT.json [--blocks 8] [--tiny] [--variants put,thread,inprog,scan]

Blocks of Wan2.1-14B width (5120 wide, 40 heads, FFN 13824, self- and cross-attention) over a 480p 81-frame
latent (32768 video tokens, batch 2 for classifier-free guidance), weights in pinned host memory, streamed a chunk
of 1 or 2 blocks at a time, in bf16 and int8 (per-output-channel scales, dequantised in the program). Variants:

  put     the executor as it stood: chunk i+1's ``device_put`` is issued from the main thread just before chunk i's
          program is dispatched
  thread  a transfer thread issues chunk i+1's ``device_put`` and waits for it while chunk i computes
  inprog  one program per chunk takes chunk i on the device and chunk i+1 in pinned host memory and returns the
          output and chunk i+1 on the device (the copy is part of the program, so XLA runs it asynchronously beside
          the compute); chunk i's buffer is donated to chunk i+1's
  scan    one program for all chunks: weights stacked in pinned host memory, each chunk moved inside a scan body

For each it prints the transfer of one chunk alone, the compute of one chunk with its weights resident, the time per
chunk streamed, and the hidden fraction 1 - max(streamed - compute, 0) / transfer. ``--tiny`` runs the same code at
toy sizes on any backend (the CPU has pinned host memory too), which is what the test suite does.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding


def dims(tiny: bool) -> dict:
    if tiny:
        return dict(batch=2, tokens=256, text=16, width=128, heads=2, ffn=256)
    return dict(batch=2, tokens=32768, text=512, width=5120, heads=40, ffn=13824)


def attention(q, k, v, heads):
    """(B, S, D) x3 -> (B, S, D); the Pallas TPU flash kernel on a TPU, plain softmax attention elsewhere."""
    b, s, d = q.shape

    def split(t):
        return t.reshape(t.shape[0], t.shape[1], heads, d // heads).transpose(0, 2, 1, 3)

    qh, kh, vh = split(q), split(k), split(v)
    scale = 1.0 / math.sqrt(d // heads)
    if jax.default_backend() == "tpu":
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        bq, bk = min(512, s), min(512, k.shape[1])
        sizes = fa.BlockSizes(block_q=bq, block_k_major=bk, block_k=bk, block_b=1, block_q_major_dkv=bq,
                              block_k_major_dkv=bk, block_k_dkv=bk, block_q_dkv=bq, block_k_major_dq=bk,
                              block_k_dq=bk, block_q_dq=bq)
        o = fa.flash_attention(qh, kh, vh, sm_scale=scale, block_sizes=sizes)
    else:
        w = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", qh, kh).astype(jnp.float32) * scale, axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", w.astype(vh.dtype), vh)
    return o.transpose(0, 2, 1, 3).reshape(b, s, d)


NAMES = ("q", "k", "v", "o", "cq", "ck", "cv", "co", "f1", "f2")


def kernel(w, name):
    """A block's kernel in bf16: as stored, or int8 values times their per-output-channel scale."""
    if name + "_s" in w:
        return (w[name].astype(jnp.bfloat16) * w[name + "_s"].astype(jnp.bfloat16))
    return w[name]


def block(x, ctx, w, heads):
    def mm(a, n):
        return jnp.dot(a, kernel(w, n), preferred_element_type=jnp.float32).astype(jnp.bfloat16)

    x = x + mm(attention(mm(x, "q"), mm(x, "k"), mm(x, "v"), heads), "o")
    x = x + mm(attention(mm(x, "cq"), mm(ctx, "ck"), mm(ctx, "cv"), heads), "co")
    return x + mm(jax.nn.gelu(mm(x, "f1")), "f2")


def chunk_fn(x, ctx, chunk, heads):
    """A chunk (every leaf stacked on a leading block axis) applied block by block."""
    def body(x, w):
        return block(x, ctx, w, heads), None

    return jax.lax.scan(body, x, chunk)[0]


def make_blocks(d: dict, n: int, quant: bool, host) -> list:
    """``n`` random blocks, made on the device one at a time and moved to pinned host memory."""
    shapes = {"q": (d["width"], d["width"]), "k": (d["width"], d["width"]), "v": (d["width"], d["width"]),
              "o": (d["width"], d["width"]), "cq": (d["width"], d["width"]), "ck": (d["width"], d["width"]),
              "cv": (d["width"], d["width"]), "co": (d["width"], d["width"]), "f1": (d["width"], d["ffn"]),
              "f2": (d["ffn"], d["width"])}

    @partial(jax.jit, static_argnums=(1,))
    def one(key, quant):
        out = {}
        for i, name in enumerate(NAMES):
            shape = shapes[name]
            w = jax.random.normal(jax.random.fold_in(key, i), shape, jnp.float32) / math.sqrt(shape[0])
            if quant:
                s = jnp.max(jnp.abs(w), axis=0) / 127.0
                out[name] = jnp.round(w / s).astype(jnp.int8)
                out[name + "_s"] = s.astype(jnp.float32)
            else:
                out[name] = w.astype(jnp.bfloat16)
        return out

    return [jax.device_put(one(jax.random.PRNGKey(i), quant), host) for i in range(n)]


def stack(blocks):
    return jax.tree.map(lambda *a: jnp.stack(a), *blocks)


def timed(fn, repeats: int) -> float:
    fn()  # compile / warm
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best.append(time.perf_counter() - t0)
    return float(np.median(best))


def run_case(d: dict, blocks_host: list, chunk: int, variant: str, x, ctx, dev, host, repeats: int) -> dict:
    heads = d["heads"]
    n = len(blocks_host)
    chunks_host = [jax.block_until_ready(jax.device_put(stack(blocks_host[i:i + chunk]), host))
                   for i in range(0, n, chunk)]
    nchunks = len(chunks_host)
    run = jax.jit(partial(chunk_fn, heads=heads))

    # alone: one chunk's transfer, one chunk's compute with its weights on the device
    def put(c):
        return jax.device_put(c, dev)

    one_dev = jax.block_until_ready(put(chunks_host[0]))
    h2d = timed(lambda: jax.block_until_ready(put(chunks_host[-1])), repeats)
    compute = timed(lambda w=one_dev: jax.block_until_ready(run(x, ctx, w)), repeats)
    del one_dev

    if variant == "put":
        def go():
            y, nxt = x, put(chunks_host[0])
            for i in range(nchunks):
                cur = nxt
                nxt = put(chunks_host[i + 1]) if i + 1 < nchunks else None
                y = run(y, ctx, cur)
            return jax.block_until_ready(y)
    elif variant == "thread":
        pool = ThreadPoolExecutor(1)

        def go():
            y = x
            fut = pool.submit(lambda: jax.block_until_ready(put(chunks_host[0])))
            for i in range(nchunks):
                cur = fut.result()
                if i + 1 < nchunks:
                    fut = pool.submit(lambda j=i + 1: jax.block_until_ready(put(chunks_host[j])))
                y = run(y, ctx, cur)
            return jax.block_until_ready(y)
    elif variant == "inprog":
        @partial(jax.jit, donate_argnums=(1,))
        def step(y, cur, nxt_host):
            nxt = jax.device_put(nxt_host, dev)
            return chunk_fn(y, ctx, cur, heads), nxt

        def go():
            y, cur = x, put(chunks_host[0])
            for i in range(nchunks):
                y, cur = step(y, cur, chunks_host[(i + 1) % nchunks])
            return jax.block_until_ready(y)
    elif variant == "scan":
        stacked_host = jax.block_until_ready(jax.device_put(stack(chunks_host), host))

        @jax.jit
        def whole(y, ws):
            def body(y, w_host):
                return chunk_fn(y, ctx, jax.device_put(w_host, dev), heads), None

            return jax.lax.scan(body, y, ws)[0]

        def go():
            return jax.block_until_ready(whole(x, stacked_host))
    else:
        raise ValueError(variant)
    total = timed(go, repeats)
    streamed = total / nchunks
    hidden = 1.0 - max(streamed - compute, 0.0) / h2d if h2d > 0 else 1.0
    return {"variant": variant, "chunk": chunk, "chunks": nchunks, "h2d_s_per_chunk": h2d,
            "compute_s_per_chunk": compute, "streamed_s_per_chunk": streamed,
            "streamed_over_resident": streamed / compute, "hidden_fraction": min(max(hidden, 0.0), 1.0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--chunks", default="1,2")
    p.add_argument("--variants", default="put,thread,inprog,scan")
    p.add_argument("--dtypes", default="bf16,int8")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    d = dims(a.tiny)
    dev0 = jax.devices()[0]
    dev, host = SingleDeviceSharding(dev0, memory_kind="device"), SingleDeviceSharding(dev0, memory_kind="pinned_host")
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (d["batch"], d["tokens"], d["width"]), jnp.bfloat16)
    ctx = jax.random.normal(jax.random.fold_in(key, 1), (d["batch"], d["text"], d["width"]), jnp.bfloat16)
    rows = []
    for dt in a.dtypes.split(","):
        blocks = make_blocks(d, a.blocks, dt == "int8", host)
        for chunk in map(int, a.chunks.split(",")):
            for variant in a.variants.split(","):
                t0 = time.perf_counter()
                try:
                    row = run_case(d, blocks, chunk, variant, x, ctx, dev, host, a.repeats)
                except Exception as e:  # one variant failing must not hide the others
                    row = {"variant": variant, "chunk": chunk, "error": f"{type(e).__name__}: {str(e)[:400]}"}
                row.update(dtype=dt, wall_s=time.perf_counter() - t0)
                rows.append(row)
                print(json.dumps(row), flush=True)
        del blocks
    meta = {"backend": jax.default_backend(), "device": str(dev0.device_kind), "jax": jax.__version__,
            "dims": d, "blocks": a.blocks, "argv": sys.argv[1:]}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
