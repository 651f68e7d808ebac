"""Per-device bytes of a Wan DiT forward (CFG batch 2) under resident / TP / SP / offload layouts.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/parallel_scripts/memory_table.py [tiny|1.3b]

Weights: per-device shard bytes of every parameter under the layout (``NamedSharding.shard_shape``) — for offload
the non-block params plus two chunks, the executor's own peak accounting. Activations: XLA's compiled memory
analysis of the jitted forward (``temp_size_in_bytes`` + output, per device), compiled on fake CPU devices from
abstract inputs, so no weight is materialized. Prints a markdown table.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plugins", "vidax_wan", "src"))

from vidax_core.parallel import sharding  # noqa: E402
from vidax_core.parallel.mesh import MeshPlan, make_mesh  # noqa: E402
from vidax_wan.dit import WanDiT, WanDiTConfig  # noqa: E402
from vidax_wan.plugin import WanPlugin  # noqa: E402

wan_plugin = WanPlugin()

CONFIGS = {
    # tiny test model (4 heads x 12, ffn 32, 4 blocks), 64x64x9 video -> 48 tokens
    "tiny": (dict(num_attention_heads=4, attention_head_dim=12, ffn_dim=32, num_layers=4, text_dim=32, freq_dim=16,
                  in_channels=4, out_channels=4, rope_max_seq_len=32), (4, 3, 8, 8), 16),
    # Wan2.1-1.3B architecture (12 heads x 128 = 1536, ffn 8960, 30 blocks); 480x832x9 video -> 3x30x52 = 4680 tokens
    "1.3b": (dict(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, num_layers=30, text_dim=4096,
                  freq_dim=256, in_channels=16, out_channels=16), (16, 3, 60, 104), 512),
}
LAYOUTS = [("resident", 1, 1, 0), ("tp2", 2, 1, 0), ("tp4", 4, 1, 0), ("sp2", 1, 2, 0), ("sp4", 1, 4, 0),
           ("tp2 x sp2", 2, 2, 0), ("offload chunk 1", 1, 1, 1), ("offload chunk 1 + tp2", 2, 1, 1)]


def main(which: str) -> None:
    kw, lat_shape, text_len = CONFIGS[which]
    cfg = WanDiTConfig(**kw)
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: WanDiT(cfg, rngs=nnx.Rngs(0))))
    rules = sharding.make_rules(wan_plugin.shard_rules(None))  # Wan keeps the core's default rules
    flat = {tuple(p): v.get_value() for p, v in nnx.to_flat_state(abstract)}
    tokens = int(np.prod(lat_shape[1:])) // 4
    print(f"### {which}: dim {cfg.dim}, {cfg.num_attention_heads} heads, ffn {cfg.ffn_dim}, {cfg.num_layers} blocks, "
          f"{tokens} video tokens, batch 2 (CFG), fp32\n")
    print("| layout | devices | weights / device (MiB) | activations / device (MiB) |")
    print("|---|---|---|---|")
    for label, tp, spn, off in LAYOUTS:
        mesh = make_mesh(MeshPlan(dp=1, tp=tp, sp=spn))
        specs = sharding.param_specs(abstract, rules, mesh)

        def nbytes(p, a, chunk=None):
            shape = (chunk,) + a.shape[1:] if chunk else a.shape
            s = jax.sharding.NamedSharding(mesh, specs[p]).shard_shape(shape)
            return int(np.prod(s)) * a.dtype.itemsize

        if off:
            w = sum(nbytes(p, a) for p, a in flat.items() if p[0] != "blocks")
            w += 2 * sum(nbytes(p, a, off) for p, a in flat.items() if p[0] == "blocks")
        else:
            w = sum(nbytes(p, a) for p, a in flat.items())
        # activations: the compiled forward of ONE block chunk (offload) or the whole model
        params_in = nnx.from_flat_state([
            (tuple(p), v.replace(jax.ShapeDtypeStruct(v.get_value().shape, v.get_value().dtype,
                                                      sharding=jax.sharding.NamedSharding(mesh, specs[tuple(p)]))))
            for p, v in nnx.to_flat_state(abstract)])
        repl = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        lat = jax.ShapeDtypeStruct((2,) + lat_shape, jnp.float32, sharding=repl)
        t = jax.ShapeDtypeStruct((2,), jnp.float32, sharding=repl)
        ctx = jax.ShapeDtypeStruct((2, text_len, cfg.text_dim), jnp.float32, sharding=repl)

        def fwd(s, a, b, c):
            with sharding.activate(mesh, rules):
                return nnx.merge(graphdef, s)(a, b, c)

        mem = jax.jit(fwd).lower(params_in, lat, t, ctx).compile().memory_analysis()
        act = (mem.temp_size_in_bytes + mem.output_size_in_bytes) if mem is not None else float("nan")
        print(f"| {label} | {tp * spn} | {w / 2**20:.2f} | {act / 2**20:.2f} |")
    print()


if __name__ == "__main__":
    for w in sys.argv[1:] or ["tiny", "1.3b"]:
        main(w)
