"""The HunyuanVideo-1.5 DiT under (dp, sp, tp) meshes of fake CPU devices gives the single-device result: the
valid-first reorder, the prefix key mask and the per-sample image test run under sharding, with Ulysses
all-to-alls on the video stream only. A subprocess, since the fake device count is fixed before jax starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vidax_core.testing.devices import xla_flags

_SCRIPT = r"""
import json, re
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_default_matmul_precision", "highest")
from flax import nnx
from vidax_core.parallel import sharding
from vidax_core.parallel.mesh import MeshPlan, make_mesh
from vidax_core.testing.sharded import place_state, under_mesh
from vidax_hunyuan.dit15 import HunyuanDiT15, HunyuanDiT15Config
from vidax_hunyuan.plugin import HunyuanPlugin
hunyuan_plugin = HunyuanPlugin()

cfg = HunyuanDiT15Config(in_channels=5, out_channels=2, num_attention_heads=4, attention_head_dim=16, num_layers=2,
                         mlp_ratio=2.0, text_embed_dim=12, text_embed_2_dim=10, image_embed_dim=8,
                         rope_axes_dim=(4, 6, 6), use_meanflow=True)
graphdef, state = nnx.split(HunyuanDiT15(cfg, rngs=nnx.Rngs(0)))
keys = iter(jax.random.split(jax.random.key(1), 1000))
state = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(next(keys), a.shape, a.dtype), state)  # biases != 0
rng = np.random.default_rng(0)
f32 = lambda *s: jnp.asarray(rng.standard_normal(s).astype(np.float32))
lat, t, tr = f32(2, 5, 2, 4, 4), jnp.asarray([999.0, 250.5]), jnp.asarray([750.0, 0.0])
mask = np.ones((2, 7), np.int32); mask[0, 4:] = 0
mask_2 = np.ones((2, 6), np.int32); mask_2[0] = 0; mask_2[1, 2:] = 0
image = np.array(f32(2, 5, 8)); image[1] = 0  # sample 1 is text-to-video
ctx = dict(hidden=f32(2, 7, 12), mask=jnp.asarray(mask), hidden_2=f32(2, 6, 10), mask_2=jnp.asarray(mask_2),
           image=jnp.asarray(image))
ref = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))(state, lat, t, ctx, tr)
rules = sharding.make_rules(hunyuan_plugin.shard_rules(None))
_, abstract = nnx.split(nnx.eval_shape(lambda: HunyuanDiT15(cfg, rngs=nnx.Rngs(0))))
out = {"devices": jax.device_count()}
for dp, sp, tp in ((2, 2, 2), (1, 4, 1)):
    mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=sp))
    placed, _ = place_state(state, abstract, rules, mesh)
    fwd = lambda s, x, *a: nnx.merge(graphdef, s)(sharding.constrain(x, ("batch",)), *a)
    f = jax.jit(under_mesh(fwd, mesh, rules))
    got = f(placed, lat, t, ctx, tr)
    hlo = f.lower(placed, lat, t, ctx, tr).compile().as_text()
    out[f"dp{dp}_sp{sp}_tp{tp}"] = dict(
        rel=float(np.abs(np.asarray(got) - np.asarray(ref)).max() / np.abs(np.asarray(ref)).max()),
        all_to_all=len(re.findall(r"all-to-all\(", hlo)))
print(json.dumps(out))
"""


@pytest.mark.long
def test_meshes_equal_one_device():
    env = dict(os.environ, XLA_FLAGS=xla_flags(8), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(r)
    assert r["devices"] == 8
    for name in ("dp2_sp2_tp2", "dp1_sp4_tp1"):
        assert r[name]["rel"] < 1e-5, (name, r[name])
        assert r[name]["all_to_all"] > 0, name  # Ulysses ran (sequence -> heads around the joint attention)
