"""Run several configurations of one model in ONE subprocess on fake CPU devices; compare each with the first.

    python -m vidax_core.testing.runs SPEC.json      (prints one JSON line)

Multi-device runs need ``--xla_force_host_platform_device_count`` set before JAX is imported, hence the
subprocess. The runs use the persistent compilation cache (:mod:`vidax_core.testing.cache`), so a layout another
test class already compiled loads instead of compiling. Every configuration uses the same seed, so all draw the same
initial noise, except the configurations named in ``moved``: their seeded noise is moved one float32 ulp up or down
at random (the k-th name with seed k: several moved runs sample several moves), so their distance from the first run
is the model's own float32 sensitivity (what a layout that changes nothing but the order of float32 operations may
differ by). A configuration the core refuses reports its
one-line error instead of a result. Configurations with the same overrides (the one-device run and its moved twin)
are two calls of one loaded model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Mapping, Sequence


def run_many(base: Sequence[str], configs: Mapping[str, Sequence[str]], *, devices: int = 8,
             plugin_modules: Sequence[str] = (), moved: Sequence[str] = (), timeout: int = 900) -> dict[str, Any]:
    """``base``: ``key=value`` overrides every run shares (model.id, model.checkpoint, small sizes...);
    ``configs``: name -> extra overrides, the first being the reference. ``plugin_modules``: modules with a
    ``register(plugins)`` function to add besides the installed plugins (test-only plugins). ``moved``: names of
    configurations whose initial noise is moved one ulp, each by its own random move (module docstring). Returns
    ``{name: {"rel": relative L2 error of the final latents vs the first, "metrics": ...} | {"error": msg}}``."""
    spec = {"base": list(base), "configs": {k: list(v) for k, v in configs.items()}, "plugins": list(plugin_modules),
            "moved": list(moved)}
    # the subprocess sees what the caller imports (e.g. a plugin's src/ folder that is not installed)
    from vidax_core.testing.devices import fake_device_env

    env = fake_device_env(devices)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spec.json")
        with open(path, "w") as f:
            json.dump({**spec, "work": tmp}, f)
        proc = subprocess.run([sys.executable, "-m", "vidax_core.testing.runs", path], capture_output=True,
                              text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"vidax_core.testing.runs failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rel(a: Any, b: Any) -> float:
    import numpy as np

    if isinstance(b, dict):
        return max(_rel(a[k], b[k]) for k in b)
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(np.asarray(b)), 1e-30))


def _one_ulp_noise(draw, seed: int):
    """``draw`` with every value of its result moved one float32 ulp up or down at random (``seed``)."""
    from vidax_core.testing.parity import move_one_ulp

    return lambda key, shapes: move_one_ulp(draw(key, shapes), seed)


def _main(path: str) -> int:
    import importlib

    import jax

    from vidax_core import config as config_mod
    from vidax_core.errors import UserError
    from vidax_core.heap import Refreezer, freeze_imports
    from vidax_core.io import draws
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.parity import move_one_ulp
    from vidax_core.runner import loaded, sampling
    from vidax_core.report.progress import Reporter

    with open(path) as f:
        spec = json.load(f)
    plugins = get_plugins()
    for name in spec["plugins"]:
        importlib.import_module(name).register(plugins)
    freeze_imports()  # the runs' collections skip the imported modules
    refreezer = Refreezer()  # and what the runs before left alive
    ref = None
    results: dict[str, Any] = {"devices": jax.device_count()}
    # configurations with the same overrides (the one-device run and its moved twin) share one loaded model: the
    # second is a call of it (its compiled step and VAE), not a second load
    keys = [tuple(v) for v in spec["configs"].values()]
    repeated = {k for k in keys if keys.count(k) > 1}
    pipes: dict[tuple, Any] = {}
    for name, extra in spec["configs"].items():
        overrides = list(spec["base"]) + [f"output.path={os.path.join(spec['work'], name + '.mp4')}",
                                          "output.overwrite=true"] + list(extra)
        draw, window_draw = sampling._draw_noise, draws.Draws.__call__
        if name in spec.get("moved", ()):  # the one-pass draw and a windowed run's every draw
            seed = spec["moved"].index(name)
            sampling._draw_noise = _one_ulp_noise(draw, seed)
            draws.Draws.__call__ = lambda self, shape: move_one_ulp(window_draw(self, shape), seed)
        try:
            cfg = config_mod.resolve(None, overrides, plugins.preset_for)
            if tuple(extra) in repeated:
                for key in [k for k in pipes if k != tuple(extra)]:
                    pipes.pop(key).close()
                if tuple(extra) not in pipes:
                    pipes[tuple(extra)] = loaded.LoadedModel(cfg, plugins, Reporter(quiet=True))
                res = pipes[tuple(extra)].generate(cfg)
            else:
                res = loaded.run(cfg, plugins, Reporter(quiet=True))
        except UserError as exc:
            results[name] = {"error": str(exc)}
            continue
        finally:
            sampling._draw_noise, draws.Draws.__call__ = draw, window_draw
        ref = res.latents if ref is None else ref
        m = res.metrics
        results[name] = {"rel": _rel(res.latents, ref), "parallel": m["parallel"], "offload": m["offload"],
                         "peak_resident_weight_bytes": m["peak_resident_weight_bytes"],
                         "per_step_s": m["per_step_s"], "compile_s": m["compile_s"], "cache": m.get("cache")}
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
        refreezer.after()
    for pipe in pipes.values():
        pipe.close()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
