"""NABLA's block-sparse self-attention (``ulysses.self_attention(fn=nabla_attention)``) on 8 fake CPU devices under
(dp, sp, tp) meshes, against one device: the block mask is computed after the all-to-all, on the whole sequence of
each device's heads, so every layout gives the one-device result. One JSON object: per layout the relative error
and the all-to-alls of the compiled program (the sequence really was exchanged)."""

from __future__ import annotations

import functools
import json
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.attention import ulysses  # noqa: E402
from vidax_core.attention.nabla import nabla_attention  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(0)
    grid = (2, 2, 3)  # 12 blocks of 64 tokens
    B, S, H, D = 2, 12 * 64, 4, 16
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(np.float32) for _ in range(3))
    fn = functools.partial(nabla_attention, grid=grid, window=(1, 1, 1), threshold=0.5, tile=128)
    one = np.asarray(jax.jit(lambda q, k, v: ulysses.self_attention(q, k, v, fn=fn))(q, k, v))
    out = {}
    for dp, sp, tp in ((1, 4, 1), (1, 2, 2), (2, 2, 2)):
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=sp))
        with sharding.activate(mesh, sharding.DEFAULT_RULES) as ctx:
            qs, ks, vs = (jax.device_put(a, ctx.sharding(("batch", "seq", "heads"))) for a in (q, k, v))
            f = jax.jit(lambda q, k, v: ulysses.self_attention(q, k, v, fn=fn))
            o = np.asarray(f(qs, ks, vs))
            all_to_all = f.lower(qs, ks, vs).compile().as_text().count("all-to-all")
        out[f"dp{dp}_sp{sp}_tp{tp}"] = {"rel": float(np.linalg.norm(o - one) / np.linalg.norm(one)),
                                        "all_to_all": all_to_all}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
