"""What reading a checkpoint tensor costs the process's resident memory (VmRSS): through one map of the whole file
(how vidax read safetensors before), that map released with ``MADV_DONTNEED``, and through vidax's per-tensor maps
(:class:`vidax_core.io.safetensors.SafetensorsFile`). On the lent TPU host (gVisor) the whole-file map made the
whole file resident on the first read.

    PYTHONPATH=$PYTHONPATH:src python3 benchmarks/file_map_probe.py OUT.json
"""

from __future__ import annotations

import gc
import json
import mmap
import sys

import numpy as np

from vidax_core.io.safetensors import SafetensorsFile, write_file

GIB = 2**30


def rss() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = round(int(line.split()[1]) / 2**20, 2)
    return out


def main() -> int:
    path = "/tmp/vidax-file-map-probe.safetensors"
    n = 2 * GIB // 2
    rng = np.random.default_rng(0)
    write_file(path, {"a": ((n,), np.dtype("int16")), "b": ((n,), np.dtype("int16"))},
               lambda name, f: f.write(rng.integers(-30000, 30000, n, dtype=np.int16).tobytes()))
    steps = {"start": rss()}
    whole = np.memmap(path, dtype=np.uint8, mode="r")
    a = np.array(whole[8:8 + 2 * n])  # roughly tensor "a": the bytes matter, not the header offset
    steps["whole_file_map_read_2gib"] = rss()
    del a
    gc.collect()
    steps["copy_freed"] = rss()
    whole._mmap.madvise(mmap.MADV_DONTNEED)
    steps["map_released"] = rss()
    del whole
    gc.collect()
    f = SafetensorsFile(path)
    a = np.array(f["a"])
    steps["per_tensor_map_read_2gib"] = rss()
    del a
    gc.collect()
    steps["per_tensor_copy_freed"] = rss()
    print(json.dumps(steps, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as out:
            json.dump(steps, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
