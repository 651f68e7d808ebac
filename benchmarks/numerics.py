"""Are the accelerator's numbers right? The same run on the accelerator and on the CPU, latents compared.

  python benchmarks/numerics.py reference CKPT OUT_DIR [--size 256x256x9] [--steps 3]     (JAX_PLATFORMS=cpu)
  python benchmarks/numerics.py compare CKPT OUT_DIR [--backends xla,pallas_tpu] [--dtypes float32,bfloat16]

A Wan2.1-1.3B checkpoint (``vidax bench --write-random-checkpoint wan2.1-t2v-1.3b CKPT``) runs from one fixed
noise tensor: ``reference`` in float32 with XLA attention on the CPU (run it in a process of its own with
``JAX_PLATFORMS=cpu``: a process that opened the accelerator cannot also run on the CPU backend), then ``compare``
once per attention backend and dtype on the default backend. Each row is the relative L2 distance of the final
latents from the reference; float32 must stay within 5e-4 (``runtime.matmul_precision: auto`` makes float32 runs
compute at full precision), bfloat16 within 3e-2. Writes OUT_DIR/numerics.json and .md; exits 1 when a row is
out of bounds, 2 when the reference is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

BOUNDS = {"float32": 5e-4, "bfloat16": 3e-2}
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "wan21_1_3b_480p.yaml")


def _run(ckpt: str, size: str, steps: int, noise: str, backend: str, dtype: str, extra: list[str]) -> tuple:
    """(final latents, metrics) of one run through the Python API."""
    import vidax

    h, w, f = map(int, size.split("x"))
    over = [f"model.checkpoint={ckpt}", f"sampling.height={h}", f"sampling.width={w}", f"sampling.num_frames={f}",
            f"sampling.num_steps={steps}", f"sampling.initial_noise={noise}", f"attention.backend={backend}",
            f"model.dtype={dtype}", *extra]
    with vidax.load(CONFIG, *over) as pipe:
        out = pipe()
    return np.asarray(out.latents, np.float32), out.metrics


def _noise(out_dir: str, size: str) -> str:
    """The fixed initial noise of Wan2.1 at ``size``: (1, 16, 1 + (F - 1) / 4, H / 8, W / 8), seed 0."""
    h, w, f = map(int, size.split("x"))
    path = os.path.join(out_dir, f"noise_{size}.npy")
    if not os.path.exists(path):
        rng = np.random.default_rng(0)
        np.save(path, rng.standard_normal((1, 16, 1 + (f - 1) // 4, h // 8, w // 8), dtype=np.float32))
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("reference", "compare"))
    p.add_argument("ckpt")
    p.add_argument("out")
    p.add_argument("--size", default="256x256x9", help="HEIGHTxWIDTHxFRAMES (default 256x256x9)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--backends", default="xla,pallas_tpu")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more run keys (both modes)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    noise = _noise(a.out, a.size)
    ref_path = os.path.join(a.out, f"reference_{a.size}_{a.steps}.npy")
    if a.mode == "reference":
        t0 = time.perf_counter()
        lat, m = _run(a.ckpt, a.size, a.steps, noise, "xla", "float32", a.set)
        np.save(ref_path, lat)
        print(f"reference on {m['backend']} in {time.perf_counter() - t0:.1f} s "
              f"(matmul precision {m['matmul_precision']}): {ref_path}")
        return 0
    if not os.path.exists(ref_path):
        print(f"error: no reference latents at {ref_path}: run the reference mode first", file=sys.stderr)
        return 2
    ref = np.load(ref_path)
    rows, failed = [], False
    for backend in a.backends.split(","):
        for dtype in a.dtypes.split(","):
            t0 = time.perf_counter()
            try:
                lat, m = _run(a.ckpt, a.size, a.steps, noise, backend, dtype, a.set)
            except Exception as exc:  # noqa: BLE001 - one failing row is reported, the others still run
                rows.append({"backend": backend, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"[:300]})
                failed = True
                print(f"{backend} {dtype}: FAILED {rows[-1]['error']}", flush=True)
                continue
            rel = float(np.linalg.norm(lat - ref) / np.linalg.norm(ref))
            ok = rel <= BOUNDS[dtype]
            failed |= not ok
            rows.append({"backend": backend, "dtype": dtype, "device": m["backend"],
                         "matmul_precision": m["matmul_precision"], "attention": m["attention_backend"],
                         "rel_l2": rel, "bound": BOUNDS[dtype], "ok": ok, "wall_s": time.perf_counter() - t0})
            print(f"{backend} {dtype} on {m['backend']} (matmul precision {m['matmul_precision']}): "
                  f"rel L2 {rel:.3e} vs bound {BOUNDS[dtype]:.0e} {'ok' if ok else 'OUT OF BOUNDS'}", flush=True)
    with open(os.path.join(a.out, "numerics.json"), "w") as f:
        json.dump({"size": a.size, "steps": a.steps, "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "numerics.md"), "w") as f:
        f.write("| attention | dtype | device | matmul precision | rel L2 vs CPU float32 | bound | ok |\n"
                "|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['backend']} | {r['dtype']} | {r.get('device', '-')} | {r.get('matmul_precision', '-')} | "
                    f"{r.get('rel_l2', float('nan')):.3e} | {BOUNDS[r['dtype']]:.0e} | "
                    f"{r.get('ok', False)} |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
