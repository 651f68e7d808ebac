"""Where a first VAE decode spends its time: each compiled program's compile seconds, the first and second decode.

  python benchmarks/vae_compile.py OUT.json [--size 480x832x81] [--dtype float32] [--cache DIR] [--tiny]

Builds the Wan2.1 VAE from its published config (parameters at their constructor values: compile time and memory
do not depend on them), decodes random latents of the size's latent grid twice, and records every XLA compilation
the first decode triggered (``jax_log_compiles``). ``--cache DIR`` turns the persistent compilation cache on, so a
second process with the same DIR shows what a warm cache leaves.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time

import jax
import numpy as np


class CompileLog(logging.Handler):
    """Collects '(program, seconds)' from JAX's compile log lines."""

    PATTERN = re.compile(r"Finished XLA compilation of (.+?) in ([0-9.e-]+) sec")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.rows: list[tuple[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.rows.append((m.group(1), float(m.group(2))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--size", default="480x832x81", help="HEIGHTxWIDTHxFRAMES of the video")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--cache", default=None)
    p.add_argument("--tiny", action="store_true", help="a narrow VAE (base 8) for a CPU check")
    a = p.parse_args()
    if a.cache:
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    log = CompileLog()
    logging.getLogger("jax").addHandler(log)  # the compile lines propagate up to it
    jax.config.update("jax_log_compiles", True)

    from vidax_core.vae.wan21 import WanVAE, WanVAEConfig, decode_video

    cfg = WanVAEConfig.from_config({"base_dim": 8} if a.tiny else {}, dtype=a.dtype)
    vae = WanVAE(cfg, with_encoder=False)
    h, w, f = map(int, a.size.split("x"))
    lat = np.random.default_rng(0).standard_normal((1, cfg.z_dim, (f - 1) // 4 + 1, h // 8, w // 8), np.float32)
    t0 = time.perf_counter()
    out = decode_video(vae, lat, devices=jax.local_devices()[:1])
    first = time.perf_counter() - t0
    n_first = len(log.rows)
    t0 = time.perf_counter()
    decode_video(vae, lat, devices=jax.local_devices()[:1])
    second = time.perf_counter() - t0
    row = {"backend": jax.default_backend(), "size": a.size, "dtype": a.dtype, "frames_out": int(out.shape[1]),
           "first_decode_s": first, "second_decode_s": second, "compile_s": sum(s for _, s in log.rows[:n_first]),
           "programs": [{"name": n, "compile_s": s} for n, s in log.rows[:n_first]], "cache": a.cache}
    print(json.dumps(row, indent=1))
    with open(a.out, "w") as fh:
        json.dump(row, fh, indent=1)


if __name__ == "__main__":
    main()
