"""The decoder-LLM text encoder placed tensor-parallel on fake CPU devices vs one device, printed as JSON.

Random tiny Llama-3-like (q/k/v/o and MLP biases, llama3 RoPE) and Gemma-3-like (mixed sliding / full layers,
sandwich and q/k norms) models, every parameter random (biases included), loaded once replicated and once with
:data:`decoder_llm.SHARD_RULES` over (dp, tp) meshes; the hidden-state stack of both is compared.
"""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.encoders import decoder_llm as dl  # noqa: E402
from vidax_core.nn.state import abstract_model, materialize  # noqa: E402
from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402

BASE = dict(vocab_size=80, hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4,
            head_dim=8, rms_norm_eps=1e-6)
CONFIGS = {
    "llama": dict(BASE, model_type="llama", num_hidden_layers=3, attention_bias=True, mlp_bias=True,
                  rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 16}),
    "gemma": dict(BASE, model_type="gemma3_text", num_hidden_layers=4, query_pre_attn_scalar=6, sliding_window=4,
                  layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"]),
}
MESHES = ((1, 2), (1, 4), (2, 4))  # (dp, tp)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def check(name: str, out: dict) -> None:
    cfg = dl.DecoderLLMConfig.from_config(CONFIGS[name])
    graphdef, abstract, flat = abstract_model(lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)))
    rng = np.random.default_rng(0)
    values = {p: (rng.standard_normal(v.shape) * 0.2 + (1.0 if p[-1] == "weight" and name == "llama" else 0.0))
              .astype(np.float32) for p, v in flat.items()}
    ids = rng.integers(1, 80, size=(2, 12)).astype(np.int32)
    mask = np.ones((2, 12), np.int32)
    mask[1, 7:] = 0  # right padding on the second prompt
    model = materialize(graphdef, abstract, values)
    gd, state = nnx.split(model)
    ref = np.asarray(jax.jit(lambda s, a, b: nnx.merge(gd, s)(a, b))(state, ids, mask))
    rules = sharding.make_rules(dl.SHARD_RULES)
    for dp, tp in MESHES:
        mesh = make_mesh(MeshPlan(dp=dp, tp=tp, sp=1))
        specs = sharding.param_specs(abstract, rules, mesh)
        put = lambda p, a: jax.device_put(a, jax.sharding.NamedSharding(mesh, specs[tuple(p)]))  # noqa: E731
        placed = materialize(graphdef, abstract, values, put=put)
        gd2, st2 = nnx.split(placed)

        def fwd(s, a, b):
            with sharding.activate(mesh, rules):
                a = sharding.constrain(a, ("batch",))
                b = sharding.constrain(b, ("batch",))
                return nnx.merge(gd2, s)(a, b)

        f = jax.jit(fwd)
        got = np.asarray(f(st2, ids, mask))
        hlo = f.lower(st2, ids, mask).compile().as_text()
        kernel = placed.kinds[0].self_attn
        out[f"{name}_dp{dp}_tp{tp}"] = {
            "rel": rel(got, ref),
            "max_abs": float(np.abs(got - ref).max()),
            "all_reduce": len(re.findall(r"all-reduce\(", hlo)),
            "q_spec": str(kernel.q_proj.kernel[...].sharding.spec),
            "k_spec": str(kernel.k_proj.kernel[...].sharding.spec),
            "o_spec": str(kernel.o_proj.kernel[...].sharding.spec),
            "down_spec": str(placed.kinds[0].mlp.down_proj.kernel[...].sharding.spec),
            "q_shard_shape": list(kernel.q_proj.kernel[...].addressable_shards[0].data.shape),
        }


if __name__ == "__main__":
    out: dict = {"devices": jax.device_count()}
    for name in CONFIGS:
        check(name, out)
    print(json.dumps(out))
