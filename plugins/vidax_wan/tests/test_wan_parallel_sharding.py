"""Golden sharding table of the Wan DiT: parameter path -> PartitionSpec under Wan's ``shard_rules``.

Regenerate after an intended change with
``VIDAX_UPDATE_GOLDEN=1 pytest plugins/vidax_wan/tests/test_wan_parallel_sharding.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flax import nnx

from vidax_core.parallel import sharding
from vidax_wan.dit import WanDiT, WanDiTConfig
from vidax_wan.plugin import WanPlugin

plugin = WanPlugin()

GOLDEN = Path(__file__).parent / "golden" / "wan_tp_sharding.json"
# Wan2.1-T2V-1.3B architecture (12 heads x 128, ffn 8960, 30 layers); eval_shape only, no memory.
CFG = WanDiTConfig(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, num_layers=30, text_dim=4096,
                   freq_dim=256, in_channels=16, out_channels=16)


def hook_rules():
    """The rules Wan's ``shard_rules`` hook hands the core, asked the way the runner asks (owner dispatch)."""
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    return plugins.call("shard_rules", plugins.registry.get("wan2.1-t2v-1.3b"))


def table(rules=None) -> dict:
    _, abstract = nnx.split(nnx.eval_shape(lambda: WanDiT(CFG, rngs=nnx.Rngs(0))))
    return sharding.spec_table(sharding.param_specs(abstract, sharding.make_rules(rules or hook_rules())))


def test_golden_table():
    got = table()
    if os.environ.get("VIDAX_UPDATE_GOLDEN"):
        lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(got.items())]
        GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    want = json.loads(GOLDEN.read_text())
    assert got == want


@pytest.mark.parametrize("attn", ["attn1", "attn2"])
def test_megatron_layout(attn):
    t = table()
    for proj in ("to_q", "to_k", "to_v"):  # column-parallel: output features split, bias split with them
        assert t[f"blocks/{attn}/{proj}/kernel"] == [None, None, "tp"]
        assert t[f"blocks/{attn}/{proj}/bias"] == [None, "tp"]
    assert t[f"blocks/{attn}/to_out/kernel"] == [None, "tp"]  # row-parallel: input features split
    assert t[f"blocks/{attn}/to_out/bias"] == []  # replicated: added once after the all-reduce
    assert t["blocks/ffn/proj_in/kernel"] == [None, None, "tp"]
    assert t["blocks/ffn/proj_out/kernel"] == [None, "tp"]
    assert t["blocks/ffn/proj_out/bias"] == []


def test_every_wan_model_gets_the_golden_rules():
    """Every Wan id's hook answer shards the 1.3B DiT exactly as the checked-in table says (not merely "the hook
    returns its constant")."""
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    want = json.loads(GOLDEN.read_text())
    ids = [s.id for s in plugins.registry if s.family == "wan"]
    assert len(ids) >= 7
    for model_id in ids:
        assert table(plugins.call("shard_rules", plugins.registry.get(model_id))) == want, model_id


def test_wan_uses_the_core_default_rules():
    assert sharding.make_rules(plugin.shard_rules(None)) == dict(sharding.DEFAULT_RULES)
