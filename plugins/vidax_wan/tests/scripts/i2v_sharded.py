"""A random tiny Wan I2V DiT forward (image context + per-token timesteps) under a dp1/sp2/tp2 mesh against the
unsharded forward; prints one JSON object (rel error, collective counts). Run by test_wan_dit_i2v.py in a subprocess
(fake CPU devices must be configured before jax is imported)."""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402
from vidax_core.testing.sharded import place_state, under_mesh  # noqa: E402
from vidax_wan.dit import WanDiT, WanDiTConfig  # noqa: E402
from vidax_wan.plugin import WanPlugin  # noqa: E402

wan_plugin = WanPlugin()


def main() -> None:
    cfg = WanDiTConfig(num_attention_heads=4, attention_head_dim=12, in_channels=12, out_channels=4, text_dim=32,
                       freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=32, image_dim=16, added_kv_proj_dim=48)
    graphdef, state = nnx.split(WanDiT(cfg, rngs=nnx.Rngs(0)))
    key = iter(jax.random.split(jax.random.key(1), 1000))
    state = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(next(key), a.shape, a.dtype), state)
    rng = np.random.default_rng(1)
    lat = jnp.asarray(rng.standard_normal((2, 12, 3, 8, 8)).astype(np.float32))
    mask = np.ones((3, 4, 4), np.float32)
    mask[0] = 0.0
    t = jnp.asarray(np.stack([mask.reshape(-1) * 900.0, mask.reshape(-1) * 40.0]))  # (2, 48) per token
    ctx = jnp.asarray(rng.standard_normal((2, 7, 32)).astype(np.float32))
    img = jnp.asarray(rng.standard_normal((2, 5, 16)).astype(np.float32))  # 5 image tokens: not divisible by sp
    ref = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))(state, lat, t, ctx, img)

    rules = sharding.make_rules(wan_plugin.shard_rules(None))  # Wan keeps the core's default rules
    _, abstract = nnx.split(nnx.eval_shape(lambda: WanDiT(cfg, rngs=nnx.Rngs(0))))
    mesh = make_mesh(MeshPlan(dp=1, tp=2, sp=2))
    placed, _ = place_state(state, abstract, rules, mesh)
    f = jax.jit(under_mesh(lambda s, a, b, c, d: nnx.merge(graphdef, s)(sharding.constrain(a, ("batch",)), b, c, d),
                           mesh, rules))
    got = f(placed, lat, t, ctx, img)
    hlo = f.lower(placed, lat, t, ctx, img).compile().as_text()
    a, b = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    print(json.dumps({
        "rel": float(np.linalg.norm(a - b) / np.linalg.norm(b)),
        "all_to_all": len(re.findall(r"all-to-all\(", hlo)),
        "all_reduce": len(re.findall(r"all-reduce\(", hlo)),
        "all_gather": len(re.findall(r"all-gather\(", hlo)),
    }))


if __name__ == "__main__":
    main()
