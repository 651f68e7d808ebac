"""The T5 and ViT encoder bases placed tensor-parallel on 8 fake CPU devices against one device, printed as JSON.

Each encoder (random parameters, every norm gain perturbed, non-zero biases) runs once unsharded, then with its
parameters placed by logical axes (``heads``/``mlp`` -> ``tp``, batch -> ``dp``) under ``(dp, tp)`` meshes. The
script reports the relative difference, the fp32 noise floor of the unsharded forward (its output change when every
parameter moves by one ulp), the specs a column- and a row-parallel kernel got, and the all-reduces XLA emitted
(proof that the run really was split).
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

from vidax_core.encoders.t5 import T5Config, T5Encoder  # noqa: E402
from vidax_core.encoders.vit import ViTConfig, ViTEncoder  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402

TOWER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def encoders():
    """name -> (constructor, inputs tuple)."""
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(3, 60, (2, 10)), jnp.int32)
    mask = jnp.asarray(np.arange(10)[None] < np.array([[6], [10]]), jnp.int32)
    px = jnp.asarray(rng.standard_normal((2, 3, 28, 28)).astype(np.float32))
    t5 = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj="gated-gelu")
    text = dict(**TOWER, vocab_size=64, max_position_embeddings=16, eos_token_id=59)
    vision = dict(**TOWER, image_size=28, patch_size=7)
    return {
        "umt5": (lambda: T5Encoder(T5Config(**t5, model_type="umt5"), rngs=nnx.Rngs(0)), (ids, mask)),
        "t5_v1_1": (lambda: T5Encoder(T5Config(**t5, model_type="t5"), rngs=nnx.Rngs(0)), (ids, mask)),
        "clip_text": (lambda: ViTEncoder(ViTConfig.clip_text(text, with_projection=True, projection_dim=24),
                                         rngs=nnx.Rngs(0)), (ids, mask)),
        "clip_vision": (lambda: ViTEncoder(ViTConfig.clip_vision(vision), rngs=nnx.Rngs(0)), (px, None)),
        "siglip_vision": (lambda: ViTEncoder(ViTConfig.siglip_vision(vision), rngs=nnx.Rngs(0)), (px, None)),
    }


def check(name, ctor, inputs, out: dict) -> None:
    graphdef, state = nnx.split(ctor())
    key = iter(jax.random.split(jax.random.key(1), 1000))
    state = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(next(key), a.shape, a.dtype), state)

    def fwd(s, x, m):
        y = nnx.merge(graphdef, s)(x, m)
        return y if isinstance(y, tuple) else (y, y[:, 0])

    ref = jax.jit(fwd)(state, *inputs)
    # fp32 noise floor of this forward: the output change when every parameter moves by one ulp (random sign)
    eps = float(np.finfo(np.float32).eps)
    nudged = jax.tree.map(lambda a: a * (1 + eps * jnp.sign(jax.random.normal(next(key), a.shape))), state)
    ulp = jax.jit(fwd)(nudged, *inputs)
    out[f"{name}_floor"] = {"rel_last": rel(ulp[0], ref[0]), "rel_pooled": rel(ulp[1], ref[1])}
    _, abstract = nnx.split(nnx.eval_shape(ctor))
    rules = sharding.make_rules(None)
    dp, tp = 2, 4  # data and 4-way tensor parallel at once: tp2 alone takes no other code path
    mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=1))
    specs = sharding.param_specs(abstract, rules, mesh)
    placed = nnx.from_flat_state([
        (tuple(p), v.replace(jax.device_put(v.get_value(), jax.sharding.NamedSharding(mesh, specs[tuple(p)]))))
        for p, v in nnx.to_flat_state(state)])

    def sharded(s, x, m):
        with sharding.activate(mesh, rules):
            x = sharding.constrain(x, ("batch",))
            return fwd(s, x, m)

    compiled = jax.jit(sharded).lower(placed, *inputs).compile()
    got = compiled(placed, *inputs)
    hlo = compiled.as_text()
    names = {"/".join(map(str, p)): str(specs[p]) for p in specs}
    col = names.get("blocks/attn/q/kernel", names.get("blocks/self_attn/q_proj/kernel"))
    row = names.get("blocks/attn/o/kernel", names.get("blocks/self_attn/out_proj/kernel"))
    out[f"{name}_dp{dp}_tp{tp}"] = {
        "rel_last": rel(got[0], ref[0]),
        "rel_pooled": rel(got[1], ref[1]),
        "q_spec": col,
        "o_spec": row,
        "all_reduce": len(re.findall(r"all-reduce\(", hlo)),
    }


def main() -> None:
    assert jax.device_count() == 8, jax.devices()
    out: dict = {}
    for name, (ctor, inputs) in encoders().items():
        check(name, ctor, inputs, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
