"""What reading a checkpoint tensor through a memory map costs the process (VmRSS): one map of the whole file vs the
tensor copied, released, read with pread, and a sparse file. Run on the TPU host: PYTHONPATH=src python3 benchmarks/file_map_probe.py"""
import ctypes, gc, json, os, sys, time
import numpy as np
from vidax_core.io.safetensors import SafetensorsFile, release_mapped_pages, write_file
def st():
    d = {}
    for l in open('/proc/self/status'):
        k = l.split(':')[0]
        if k in ('VmRSS', 'RssAnon', 'RssFile', 'RssShmem'): d[k] = round(int(l.split()[1]) / 2**20, 2)
    return d
out = {"start": st()}
path = "/tmp/probe.safetensors"
n = 2 << 30
write_file(path, {"a": ((n // 2,), np.dtype("int16")), "b": ((n // 2,), np.dtype("int16"))},
           lambda name, f: f.write(np.random.default_rng(0).integers(-30000, 30000, n // 2, dtype=np.int16).tobytes()))
out["written_4gib_random"] = st()
f = SafetensorsFile(path)
a = np.array(f["a"]); out["memmap_read_copy_a"] = st()
del a; gc.collect(); out["copy_freed"] = st()
release_mapped_pages(); out["released"] = st()
fd = os.open(path, os.O_RDONLY); buf = np.empty(n, np.uint8); os.preadv(fd, [memoryview(buf)], 8 + 0); out["pread_2gib"] = st()
del buf; gc.collect(); out["pread_freed"] = st()
ctypes.CDLL("libc.so.6").malloc_trim(0); out["malloc_trim"] = st()
x = np.ones(n // 4, np.float32); out["ones_2gib"] = st(); del x; gc.collect(); out["ones_freed"] = st()
sparse = "/tmp/probe_sparse.safetensors"
write_file(sparse, {"z": ((n // 2,), np.dtype("int16"))}, None)
g = SafetensorsFile(sparse); z = np.array(g["z"]); out["sparse_read_copy"] = st(); del z; gc.collect()
release_mapped_pages(); out["sparse_released"] = st()
print(json.dumps(out, indent=0))
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "mmap_probe.json"), "w"), indent=1)
