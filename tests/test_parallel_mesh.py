"""Mesh planning and logical -> mesh axis rules (no devices needed: runs in the pytest process)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from jax.sharding import PartitionSpec as P

from vidax_core.errors import UserError
from vidax_core.parallel.mesh import plan_mesh
from vidax_core.parallel.sharding import DEFAULT_RULES, logical_to_spec, make_rules


def par(dp=None, tp=1, sp=1):
    return NS(dp=dp, tp=tp, sp=sp)


def plan(p, n=8, heads=12, tokens=32760, batch=2, **kw):
    return plan_mesh(p, n_devices=n, heads=heads, video_tokens=tokens, batch=batch, **kw)


def test_dp_null_takes_the_remaining_devices():
    assert plan(par(tp=2, sp=2), n=8, heads=8).dp == 2
    assert plan(par(tp=4), n=8, heads=8).dp == 2
    assert plan(par(), n=1).dp == 1


@pytest.mark.parametrize(
    "p, kw, names",
    [
        (par(dp=1, tp=5), {}, "parallel.tp"),  # 12 heads % 5
        (par(dp=1, tp=2, sp=4), {}, "parallel.sp"),  # 12/2 = 6 heads per shard % 4
        (par(dp=1, sp=2), {"tokens": 33}, "parallel.sp"),  # tokens % sp
        (par(dp=None), {"heads": 8}, "parallel.dp"),  # dp = 8 does not divide the CFG batch of 2
        (par(dp=2), {"batch": 1}, "parallel.dp"),  # no guidance: batch 1
        (par(dp=1, tp=4, sp=4), {"heads": 16}, "parallel.tp"),  # 16 devices needed, 8 visible
        (par(dp=4, tp=4), {"heads": 8}, "parallel.dp"),  # 16 > 8
        (par(dp=None, tp=3), {"heads": 12}, "parallel.dp"),  # 8 devices % 3
    ],
)
def test_divisibility_errors_name_the_key(p, kw, names):
    with pytest.raises(UserError) as err:
        plan(p, **kw)
    msg = str(err.value)
    assert "\n" not in msg and names in msg


def test_sp_rule_follows_the_attention_kind():
    """The issue's case: SANA-Video 2B (20 heads) at sp=8 over its 32,760 tokens. Ulysses (softmax) needs the heads
    of a tp shard to split over sp; linear attention exchanges no heads, so only the tokens must split."""
    from vidax_core.attention.kinds import exchanges_heads

    with pytest.raises(UserError, match="parallel.sp=8 must divide the 20 attention heads"):
        plan(par(dp=1, sp=8), heads=20, sp_splits_heads=exchanges_heads(("softmax", "cross")))
    assert plan(par(dp=1, sp=8), heads=20, sp_splits_heads=exchanges_heads(("linear", "cross"))).sp == 8
    with pytest.raises(UserError, match="parallel.sp=8 must divide the 32761 video tokens"):
        plan(par(dp=1, sp=8), heads=20, tokens=32761, sp_splits_heads=False)
    with pytest.raises(UserError, match="parallel.tp=8 must divide the model's 20"):
        plan(par(dp=1, tp=8), heads=20, sp_splits_heads=False)
    with pytest.raises(ValueError, match="unknown attention kind"):
        exchanges_heads(("flash",))


def test_offload_chunk_must_divide_the_group():
    off = NS(enabled=True, chunk_size=4)
    with pytest.raises(UserError, match="offload.chunk_size=4 must divide the 30 blocks"):
        plan(par(dp=1), block_groups={"blocks": 40, "single": 30}, offload=off)
    plan(par(dp=1), block_groups={"blocks": 30}, offload=NS(enabled=False, chunk_size=7))


def test_logical_rules_to_specs():
    rules = make_rules([("embed", None), ("heads", "tp")])
    assert logical_to_spec(("layers", "embed", "heads"), rules) == P(None, None, "tp")
    assert logical_to_spec(("layers", "heads", "embed"), rules) == P(None, "tp")
    assert logical_to_spec(("batch", "seq", "heads"), rules) == P("dp", "sp", "tp")
    # a mesh axis is used at most once per array
    assert logical_to_spec(("heads", "mlp"), dict(DEFAULT_RULES)) == P("tp")
    assert logical_to_spec(None, rules) == P()
