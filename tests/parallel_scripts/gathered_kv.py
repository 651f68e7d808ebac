"""Replicated queries against sequence-sharded keys (``ulysses.gathered_kv_attention``, LTX-2's video-to-audio
attention) on 8 fake CPU devices under (dp, sp, tp) meshes, against the plain single-device attention; printed as
one JSON object: relative error, whether a key mask changes the result, the output's sharding, the collectives."""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.attention import attention  # noqa: E402
from vidax_core.attention import ulysses  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main() -> None:
    rng = np.random.default_rng(0)
    B, Sq, Sk, H, D = 2, 6, 16, 4, 8
    mk = lambda *s: jnp.asarray(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    q, k, v = mk(B, Sq, H, D), mk(B, Sk, H, D), mk(B, Sk, H, D)
    mask = np.ones((B, Sk), bool)
    mask[1, 5:] = False  # keys on every sp shard but the first are masked for sample 1
    mask = jnp.asarray(mask)
    ref, ref_m = attention(q, k, v), attention(q, k, v, kv_mask=mask)
    out = {}
    for dp, sp, tp in ((1, 4, 1), (1, 2, 2), (2, 2, 2), (1, 8, 1)):
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=sp))
        with sharding.activate(mesh, sharding.DEFAULT_RULES) as ctx:
            qs = jax.device_put(q, ctx.sharding(("batch", None, "heads")))
            ks, vs = (jax.device_put(a, ctx.sharding(("batch", "seq", "heads"))) for a in (k, v))
            f = jax.jit(lambda q, k, v, m: ulysses.gathered_kv_attention(q, k, v, kv_mask=m))
            g = jax.jit(lambda q, k, v: ulysses.gathered_kv_attention(q, k, v))
            o, o_m = g(qs, ks, vs), f(qs, ks, vs, mask)
            hlo = f.lower(qs, ks, vs, mask).compile().as_text()
            out[f"dp{dp}_sp{sp}_tp{tp}"] = {
                "err": rel(o, ref), "err_masked": rel(o_m, ref_m), "mask_moves": rel(ref_m, ref),
                "spec": str(o.sharding.spec), "all_gather": len(re.findall(r"all-gather", hlo)),
                "all_to_all": len(re.findall(r"all-to-all", hlo)),
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
