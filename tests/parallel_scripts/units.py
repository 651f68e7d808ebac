"""Unit checks of the parallel machinery on 8 fake CPU devices, printed as one JSON object.

* Ulysses self-attention, cross-attention and the joint [text; video] variant under (sp, tp) meshes against the
  plain single-device attention;
* a random tiny Wan DiT forward under tp/sp meshes against the unsharded forward, and the collectives XLA emitted
  (Ulysses must show all-to-alls, TP all-reduces, and the SP activations must not be all-gathered to full length).
"""

from __future__ import annotations

import json
import os
import re
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.attention import ulysses as sp_mod  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.attention import attention  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def attention_checks(out: dict) -> None:
    rng = np.random.default_rng(0)
    B, S, L, H, D = 2, 16, 6, 8, 4
    mk = lambda *s: jnp.asarray(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    q, k, v = mk(B, S, H, D), mk(B, S, H, D), mk(B, S, H, D)
    tq, tk, tv = mk(B, L, H, D), mk(B, L, H, D), mk(B, L, H, D)
    ref_self = attention(q, k, v)
    ref_cross = attention(q, tk, tv)
    jq, jk, jv = (jnp.concatenate([a, b], 1) for a, b in ((tq, q), (tk, k), (tv, v)))
    ref_joint = attention(jq, jk, jv)
    for dp, spn, tp in ((1, 4, 1), (1, 2, 2), (2, 2, 2)):
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=spn))
        name = f"dp{dp}_sp{spn}_tp{tp}"
        with sharding.activate(mesh, sharding.DEFAULT_RULES) as ctx:
            seq = ctx.sharding(("batch", "seq", "heads"))
            rep = ctx.sharding(("batch", None, "heads"))
            qs, ks, vs = (jax.device_put(a, seq) for a in (q, k, v))
            ts = [jax.device_put(a, rep) for a in (tq, tk, tv)]
            f_self = jax.jit(sp_mod.self_attention)
            f_cross = jax.jit(sp_mod.cross_attention)
            f_joint = jax.jit(lambda t, x: sp_mod.joint_attention(t, x))
            o_self = f_self(qs, ks, vs)
            o_cross = f_cross(qs, ts[1], ts[2])
            o_t, o_v = f_joint(tuple(ts), (qs, ks, vs))
            hlo = f_joint.lower(tuple(ts), (qs, ks, vs)).compile().as_text()
        out[f"attn_{name}"] = {
            "self": rel(o_self, ref_self),
            "cross": rel(o_cross, ref_cross),
            "joint_text": rel(o_t, ref_joint[:, :L]),
            "joint_video": rel(o_v, ref_joint[:, L:]),
            "video_out_spec": str(o_v.sharding.spec),
            "joint_all_to_all": len(re.findall(r"all-to-all\(", hlo)),
        }


def dit_checks(out: dict) -> None:
    from flax import nnx

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plugins", "vidax_wan", "src"))
    from vidax_wan.dit import WanDiT, WanDiTConfig

    cfg = WanDiTConfig(num_attention_heads=4, attention_head_dim=12, in_channels=4, out_channels=4, text_dim=32,
                       freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=32)
    model = WanDiT(cfg, rngs=nnx.Rngs(0))
    # non-zero biases everywhere
    graphdef, state = nnx.split(model)
    key = iter(jax.random.split(jax.random.key(1), 1000))
    state = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(next(key), a.shape, a.dtype), state)
    rng = np.random.default_rng(1)
    lat = jnp.asarray(rng.standard_normal((2, 4, 3, 8, 8)).astype(np.float32))
    t = jnp.asarray([500.0, 500.0], jnp.float32)
    ctx = jnp.asarray(rng.standard_normal((2, 5, 32)).astype(np.float32))
    ref = jax.jit(lambda s, a, b, c: nnx.merge(graphdef, s)(a, b, c))(state, lat, t, ctx)
    rules = sharding.make_rules(None)  # Wan's shard_rules are the core defaults
    _, abstract = nnx.split(nnx.eval_shape(lambda: WanDiT(cfg, rngs=nnx.Rngs(0))))
    for dp, spn, tp in ((1, 2, 2),):
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=spn))
        specs = sharding.param_specs(abstract, rules, mesh)
        placed = nnx.from_flat_state([
            (tuple(p), v.replace(jax.device_put(v.get_value(), jax.sharding.NamedSharding(mesh, specs[tuple(p)]))))
            for p, v in nnx.to_flat_state(state)])

        def fwd(s, a, b, c):
            with sharding.activate(mesh, rules):
                a = sharding.constrain(a, ("batch",))
                return nnx.merge(graphdef, s)(a, b, c)

        f = jax.jit(fwd)
        got = f(placed, lat, t, ctx)
        hlo = f.lower(placed, lat, t, ctx).compile().as_text()
        name = f"dp{dp}_sp{spn}_tp{tp}"
        out[f"dit_{name}"] = {
            "rel": rel(got, ref),
            "all_to_all": len(re.findall(r"all-to-all\(", hlo)),
            "all_reduce": len(re.findall(r"all-reduce\(", hlo)),
            "all_gather": len(re.findall(r"all-gather\(", hlo)),
        }


if __name__ == "__main__":
    out: dict = {"devices": jax.device_count()}
    attention_checks(out)
    dit_checks(out)
    print(json.dumps(out))
