"""What the accelerator runtime holds of the host's memory, and whether a setting lowers it.

    python benchmarks/tpu_host_memory.py OUT.json [--premapped BYTES ...]

For each ``TPU_PREMAPPED_BUFFER_SIZE`` asked for (and the runtime's default), a fresh process reports its resident
and anonymous memory after ``import jax``, after the backend starts (``jax.devices()``), after 2 GiB go to the
device from pageable numpy memory (with the transfer's seconds), after 2 GiB of pinned host memory are allocated,
and after the CPU backend starts beside it, so each step of a run's host memory can be put down to its cause.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

PROBE = r"""
import json, os, sys, time
def mem():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            for k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                if line.startswith(k + ":"):
                    out[k] = round(int(line.split()[1]) / 2**20, 2)  # GiB
    return out
steps = {"start": mem()}
import jax, numpy as np
steps["import_jax"] = mem()
devs = jax.devices()
steps["backend_started"] = mem()
steps["device"] = str(devs[0].device_kind)
x = np.ones((2 << 30) // 4, np.float32)
steps["numpy_2gib"] = mem()
t0 = time.perf_counter(); d = jax.block_until_ready(jax.device_put(x)); dt = time.perf_counter() - t0
steps["h2d_2gib"] = {**mem(), "seconds": round(dt, 3), "gib_per_s": round(2 / dt, 2)}
del x, d
steps["freed"] = mem()
try:
    s = jax.sharding.SingleDeviceSharding(devs[0], memory_kind="pinned_host")
    p = jax.block_until_ready(jax.device_put(np.ones((2 << 30) // 4, np.float32), s))
    steps["pinned_2gib"] = mem()
    t0 = time.perf_counter(); d = jax.block_until_ready(jax.device_put(p, jax.sharding.SingleDeviceSharding(devs[0])))
    dt = time.perf_counter() - t0
    steps["h2d_pinned_2gib"] = {**mem(), "seconds": round(dt, 3), "gib_per_s": round(2 / dt, 2)}
    del p, d
except Exception as e:
    steps["pinned_2gib"] = {"error": str(e)[:200]}
try:
    jax.devices("cpu")
    steps["cpu_backend_started"] = mem()
except Exception as e:
    steps["cpu_backend_started"] = {"error": str(e)[:200]}
print("PROBE " + json.dumps(steps))
"""


def probe(premapped: str | None) -> dict:
    env = dict(os.environ)
    if premapped is not None:
        env["TPU_PREMAPPED_BUFFER_SIZE"] = premapped
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    row = {"TPU_PREMAPPED_BUFFER_SIZE": premapped or "default", "rc": out.returncode,
           "wall_s": round(time.perf_counter() - t0, 1)}
    for line in out.stdout.splitlines():
        if line.startswith("PROBE "):
            row["steps"] = json.loads(line[6:])
    if out.returncode:
        row["stderr"] = out.stderr[-2000:]
    return row


def main() -> int:
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    path, sizes = args[0], [None]
    if "--premapped" in args:
        sizes += args[args.index("--premapped") + 1:]
    rows = [probe(s) for s in sizes]
    for r in rows:
        print(json.dumps(r))
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
