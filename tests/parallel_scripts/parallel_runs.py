"""Run the vidax pipeline under several parallel/offload configurations in ONE process and print JSON.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python parallel_runs.py CKPT WORKDIR name=k=v,k=v ...

The first configuration is the reference; every result reports the relative L2 error of its final latents against
it, the metrics' ``peak_resident_weight_bytes`` and the error message of configurations that are refused.
Used by tests/test_parallel_*.py (multi-device tests need the fake device count set before jax is imported).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")

import numpy as np  # noqa: E402

BASE = [
    "model.id=wan2.1-t2v-1.3b", "prompt=a small red fox runs in the snow", "negative_prompt=blurry",
    "sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
    "sampling.guidance_scale=5.0", "sampling.max_sequence_length=16", "runtime.compilation_cache=false",
]


def main(argv: list[str]) -> int:
    import jax

    from vidax_core import config as config_mod
    from vidax_core.runner import pipeline
    from vidax_core.errors import UserError
    from vidax_core.plugins import get_plugins
    from vidax_core.runner.progress import Reporter

    ckpt, work, *specs = argv
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(ckpt):  # the tiny 4-head, 4-block Wan the parallel tests use
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "testing"))
        from vidax_testing.tiny_wan import save_tiny_wan

        save_tiny_wan(ckpt, seed=3, dit={"num_attention_heads": 4, "num_layers": 4})
    plugins = get_plugins()
    preset = lambda mid: dict(plugins.registry.get(mid).preset)  # noqa: E731
    noise = os.path.join(work, "noise.npy")
    if not os.path.exists(noise):
        np.save(noise, np.random.default_rng(0).standard_normal((1, 4, 2, 8, 8)).astype(np.float32))
    ref = None
    results = {"devices": jax.device_count()}
    for item in specs:
        name, _, over = item.partition("=")
        overrides = BASE + [f"model.checkpoint={ckpt}", f"sampling.initial_noise={noise}",
                            f"output.path={os.path.join(work, name + '.mp4')}", "output.overwrite=true"]
        overrides += [o for o in over.split(",") if o]
        try:
            cfg = config_mod.resolve(None, overrides, preset)
            res = pipeline.run(cfg, plugins, Reporter(quiet=True))
        except UserError as exc:
            results[name] = {"error": str(exc)}
            continue
        lat = res.latents
        if ref is None:
            ref = lat
        rel = float(np.linalg.norm(lat - ref) / np.linalg.norm(ref))
        m = res.metrics
        results[name] = {"rel": rel, "peak_resident_weight_bytes": m["peak_resident_weight_bytes"],
                         "parallel": m["parallel"], "offload": m["offload"], "per_step_s": m["per_step_s"], "compile_s": m["compile_s"]}
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
