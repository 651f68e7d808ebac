"""Tiny Cosmos3 DiTs (Nano- and Edge-style) placed on (dp, sp, tp) meshes of 8 fake CPU devices vs one device,
printed as JSON (run by test_cosmos3_parallel.py in a subprocess: the fake device count must be set before JAX is
imported).

Parameters are random with every norm gain perturbed and placed by their logical axes (heads/mlp -> tp); the batch
holds two guidance branches with text lengths 7 and 4. Reported per mesh: the relative difference to one device,
the unsharded forward's fp32 noise floor (its output change when every parameter moves by one ulp), the spec a
key projection got, and the collectives XLA emitted (proof that the run really was split).
"""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402
from vidax_core.testing.sharded import place_state, under_mesh  # noqa: E402
from vidax_cosmos.cosmos3_dit import Cosmos3DiT, Cosmos3DiTConfig  # noqa: E402

_COMMON = dict(head_dim=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, latent_channel=4,
               patch_latent_dim=16, vocab_size=64, rope_axes_dim=(4, 2, 2))
CONFIGS = {
    "nano": dict(_COMMON, hidden_size=64, intermediate_size=96, attention_bias=True, hidden_act="silu"),
    "edge": dict(_COMMON, hidden_size=48, intermediate_size=80, hidden_act="relu2", qk_norm_for_text=False,
                 use_und_k_norm_for_gen=True, rms_norm_eps=1e-5),
}
MESHES = ((2, 2, 2),)  # (dp, sp, tp): every axis at once; TP or SP alone takes no other code path


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def inputs():
    rng = np.random.default_rng(0)
    lat = rng.standard_normal((1, 4, 3, 4, 6)).astype(np.float32)
    ids = np.zeros((2, 7), np.int32)
    ids[0], ids[1, :4] = rng.integers(1, 60, 7), rng.integers(1, 60, 4)
    return (jnp.asarray(np.concatenate([lat, lat])), jnp.full((2,), 600.0), jnp.asarray(ids),
            jnp.asarray([7, 4], jnp.int32), jnp.asarray([[0.0, 1.0, 1.0]] * 2))


def check(kind: str, out: dict) -> None:
    cfg = Cosmos3DiTConfig(**CONFIGS[kind])
    ctor = lambda: Cosmos3DiT(cfg, rngs=nnx.Rngs(0))  # noqa: E731
    graphdef, state = nnx.split(ctor())
    key = iter(jax.random.split(jax.random.key(1), 1000))
    state = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(next(key), a.shape, a.dtype), state)
    args = inputs()

    def fwd(s, x, t, i, n, f):
        return nnx.merge(graphdef, s)(x, t, i, text_lengths=n, noisy_frames=f, fps=16.0)

    ref = jax.jit(fwd)(state, *args)
    eps = float(np.finfo(np.float32).eps)
    nudged = jax.tree.map(lambda a: a * (1 + eps * jnp.sign(jax.random.normal(next(key), a.shape))), state)
    out[f"{kind}_floor"] = rel(jax.jit(fwd)(nudged, *args), ref)
    _, abstract = nnx.split(nnx.eval_shape(ctor))
    rules = sharding.make_rules(None)
    for dp, sp, tp in MESHES:
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=sp))
        placed, specs = place_state(state, abstract, rules, mesh)
        compiled = jax.jit(under_mesh(fwd, mesh, rules)).lower(placed, *args).compile()
        got = compiled(placed, *args)
        hlo = compiled.as_text()
        out[f"{kind}_dp{dp}_sp{sp}_tp{tp}"] = {
            "rel": rel(got, ref),
            "k_spec": str(specs[("blocks", "self_attn", "add_k_proj", "kernel")]),
            "all_reduce": len(re.findall(r"all-reduce\(", hlo)),
            "all_to_all": len(re.findall(r"all-to-all\(", hlo)),
        }


def main() -> None:
    assert jax.device_count() == 8, jax.devices()
    out: dict = {}
    for kind in CONFIGS:
        check(kind, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
