"""A causal run's cost per chunk as the video grows: AnyFlow-FAR made chunk by chunk over its kept KV cache, every
chunk's time (its steps, its cache write, its decode), chunk 1 against chunk 20; and with ``--recompute`` the same
video recomputing the whole prefix after every chunk (the reference's way, ``options.use_kv_cache=false``), whose
cost grows.

  python benchmarks/causal_chunks.py [OUT] [--chunks 24] [--window 6] [--size 64] [--steps 2] [--recompute]
                                          [--checkpoint DIR] [--model anyflow-far-wan2.1-1.3b] [--override k=v ...]

Default: the built-in tiny random FAR checkpoint on CPU at 64x64, chunks of 3 latent frames after a first of 1 (as
the released partition), a cache window of 6 latent frames so the ring fills after a few chunks. The video is made
twice in one loaded pipe: the first run compiles each chunk shape (every one until the ring is full), the second
is timed (``warm``). Printed: one line per chunk of the warm run, then chunk 1 vs chunk 20 (the first chunk after
the first one; 1-based: the second window) and their ratio. Written: OUT/causal_chunks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def run(pipe, frames: int, options: dict) -> dict:
    t0 = time.perf_counter()
    out = pipe(num_frames=frames, options=options)
    return {"wall_s": time.perf_counter() - t0, "windows": out.metrics["windows"],
            "kv_cache_bytes": out.metrics.get("kv_cache_bytes"), "frames": int(out.frames.shape[1])}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="out/causal_chunks")
    p.add_argument("--chunks", type=int, default=24)
    p.add_argument("--window", type=int, default=6, help="options.cache_window (latent frames of compressed past)")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--chunk-frames", type=int, default=3, help="latent frames of every chunk after the first")
    p.add_argument("--recompute", action="store_true", help="also time the recomputed prefix (use_kv_cache=false)")
    p.add_argument("--model", default="anyflow-far-wan2.1-1.3b")
    p.add_argument("--checkpoint", default="builtin:tiny-random")
    p.add_argument("--override", action="append", default=[], help="more key=value overrides of the load")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import vidax

    latent = 1 + a.chunk_frames * (a.chunks - 1)
    frames = (latent - 1) * 4 + 1
    partition = [1] + [a.chunk_frames] * (a.chunks - 1)
    pipe = vidax.load(a.model, f"model.checkpoint={a.checkpoint}", "prompt=a red fox runs in the snow",
                      f"sampling.height={a.size}", f"sampling.width={a.size}", f"sampling.num_steps={a.steps}",
                      f"sampling.num_frames={frames}", *a.override)
    report = {"model": a.model, "checkpoint": a.checkpoint, "size": a.size, "steps": a.steps, "chunks": a.chunks,
              "partition": partition, "cache_window": a.window, "frames": frames, "runs": {}}
    modes = {"kept": {"chunk_partition": partition, "cache_window": a.window}}
    if a.recompute:
        modes["recompute"] = {"chunk_partition": partition, "use_kv_cache": False}
    for mode, options in modes.items():
        cold = run(pipe, frames, options)
        warm = run(pipe, frames, options)
        totals = [w["total_s"] for w in warm["windows"]]
        one, twenty = totals[1], totals[min(20, len(totals) - 1)]
        report["runs"][mode] = {"cold": cold, "warm": warm, "chunk_1_s": one, "chunk_20_s": twenty,
                                "ratio_20_to_1": twenty / one}
        print(f"{mode}: kv cache {warm['kv_cache_bytes']} bytes, {warm['frames']} frames, warm {warm['wall_s']:.2f} s "
              f"(cold {cold['wall_s']:.2f} s)")
        for w in warm["windows"]:
            print(f"  chunk {w['window']:>3}: {w['latent_frames']} latent frames, sampling {w['sampling_s']:.3f} s, "
                  f"cache write {w.get('cache_fill_s', 0.0):.3f} s, decode {w['decode_s']:.3f} s, "
                  f"total {w['total_s']:.3f} s")
        print(f"  chunk 1 {one:.3f} s, chunk {min(20, len(totals) - 1)} {twenty:.3f} s: ratio {twenty / one:.3f}")
    pipe.close()
    with open(os.path.join(a.out, "causal_chunks.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {os.path.join(a.out, 'causal_chunks.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
