"""The Cosmos3 DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 layer), for a
Nano-style and an Edge-style (relu^2, ``k_norm_und_for_gen``) config.

With one layer XLA drops the text stream's output projection and MLP (nothing reads the text after the last
layer); in a scanned stack of many layers every layer runs them, which the counter states, so the test takes that
dead tail off the count before comparing."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core import flops as F
from vidax_core.testing.flops import check_flops
from vidax_cosmos.cosmos3_dit import Cosmos3DiT, Cosmos3DiTConfig
from vidax_cosmos.cosmos3_flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(hidden_size=256, intermediate_size=512, head_dim=64, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=1, latent_channel=16, patch_latent_dim=64, vocab_size=64,
            rope_scaling={"mrope_section": [16, 8, 8]})
EDGE = dict(WIDE, hidden_act="relu2", qk_norm_for_text=False, use_und_k_norm_for_gen=True)


@pytest.mark.parametrize("config", [WIDE, EDGE], ids=["nano", "edge"])
def test_flops_match_xla(config):
    cfg = Cosmos3DiTConfig.from_config(config)
    model = Cosmos3DiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 1, (3, 16, 15), 40
    x = jnp.zeros((batch, 16, *grid), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ids = jnp.zeros((batch, text), jnp.int32)
    mlp = (3 if cfg.hidden_act == "silu" else 2) * cfg.intermediate_size
    dead = F.linear(batch * text, cfg.q_dim, cfg.hidden_size) + F.linear(batch * text, cfg.hidden_size, mlp)
    check_flops(counter(cfg)(batch, grid, text) - dead, model, x, t, ids)


def test_flops_scale_with_layers_and_batch():
    f = {n: counter(Cosmos3DiTConfig.from_config({**WIDE, "num_hidden_layers": n}))(1, (3, 16, 16), 24)
         for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(Cosmos3DiTConfig.from_config(WIDE))(2, (3, 16, 16), 24) == pytest.approx(2 * f[1])
