"""SANA's two blocks against diffusers on tiny random weights (CPU, fp32 against the float64 reference):

* linear attention (``Attention.linear``: q/k normed across heads, ReLU, RoPE on the numerator's q/k only, one
  sum over the whole sequence) against ``SanaLinearAttnProcessor3_0`` with Wan's RoPE table;
* the convolutional feed-forward (``GLUMBConv``) against ``GLUMBTempConv`` (SANA-Video: 3x3 depthwise per frame,
  then a 3-frame conv across frames) and the image ``GLUMBConv`` (no temporal conv), converted by its key rules;
* sequence parallelism (fake CPU devices, one subprocess): the linear attention at sp = 4 over tokens that tp = 2
  does not leave whole heads for Ulysses (3 heads), the summaries summed over sp; and the convolutional
  feed-forward in a two-block ``lax.scan`` at tp 2 x sp 4, each sp shard holding half a frame, equal to one device
  (written as windowed convolutions, XLA partitioned it wrongly there).
"""

from __future__ import annotations

import textwrap

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.io.convert import convert
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.conv_feedforward import GLUMBConv, glumb_conv_rules
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.testing.parity import assert_fp32_parity, fp32_error
from vidax_core.testing.reference import randomize_, reference_in, state_arrays

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

DIM, HEADS = 48, 4
GRID = (3, 4, 5)  # frames, height, width of the token grid


def _load(ctor, rules, tensors):
    graphdef, state, flat = abstract_model(ctor)
    return materialize(graphdef, state, convert(tensors, rules, flat, component="test"))


def _torch_rope(head_dim: int):
    from diffusers.models.transformers.transformer_sana_video import WanRotaryPosEmbed

    rope = WanRotaryPosEmbed(head_dim, (1, 1, 1), 64)
    return rope(torch.zeros(1, 1, *GRID))


@pytest.fixture(scope="module")
def attention():
    from diffusers.models.attention_processor import Attention as TorchAttention
    from diffusers.models.transformers.transformer_sana_video import SanaLinearAttnProcessor3_0

    ref = TorchAttention(query_dim=DIM, heads=HEADS, dim_head=DIM // HEADS, kv_heads=HEADS,
                         qk_norm="rms_norm_across_heads", bias=True, processor=SanaLinearAttnProcessor3_0())
    randomize_(ref, seed=3, std=0.2)
    return ref, _dotted(state_arrays(ref))


def _dotted(tensors: dict) -> dict:
    """Keys as a sub-module's (``.to_q.weight``): the rule tables take a prefix regex ending before ``\\.``."""
    return {"." + k: v for k, v in tensors.items()}


def _attention(weights):
    from vidax_core.io.diffusers_rules import attention_rules

    return _load(lambda: Attention(DIM, HEADS, dtype=jnp.float32, rngs=nnx.Rngs(0), qk_norm="rms_norm_across_heads",
                                   qk_eps=1e-5), attention_rules("", "", qk_norm="rms_norm_across_heads"), weights)


def test_linear_attention_matches_diffusers(attention):
    ref, weights = attention
    x = np.random.default_rng(0).standard_normal((2, int(np.prod(GRID)), DIM)).astype(np.float32)
    cos, sin = rope_lib.cos_sin(rope_lib.grid_angles(list(GRID), rope_lib.split_axes_wan(DIM // HEADS)))

    def vidax(weights, inputs):
        return np.asarray(_attention(weights).linear(jnp.asarray(inputs), (cos, sin)))

    got = vidax(weights, x)

    def run(dtype):
        with reference_in(ref, dtype) as m:
            rot = tuple(t.to(dtype) for t in _torch_rope(DIM // HEADS))
            return m(torch.from_numpy(x).to(dtype), rotary_emb=rot).double().numpy()

    err = fp32_error(vidax, weights, x, base=got)
    assert_fp32_parity("linear attention", got, run(torch.float32), run(torch.float64), vidax_err=err)


@pytest.mark.parametrize("temporal", [True, False], ids=["video", "image"])
def test_conv_feedforward_matches_diffusers(temporal):
    from diffusers.models.transformers.sana_transformer import GLUMBConv as TorchImage
    from diffusers.models.transformers.transformer_sana_video import GLUMBTempConv

    f, h, w = GRID
    if temporal:
        ref = GLUMBTempConv(DIM, DIM, 2.5, norm_type=None, residual_connection=False)
    else:
        ref = TorchImage(DIM, DIM, 2.5, norm_type=None, residual_connection=False)
    randomize_(ref, seed=4, std=0.2)
    hidden = int(2.5 * DIM)
    x = np.random.default_rng(1).standard_normal((2, f * h * w, DIM)).astype(np.float32)

    def vidax(weights, inputs):
        m = _load(lambda: GLUMBConv(DIM, hidden, temporal_kernel=3 if temporal else None, rngs=nnx.Rngs(0)),
                  glumb_conv_rules("", ""), weights)
        return np.asarray(m(jnp.asarray(inputs), GRID))

    weights = _dotted(state_arrays(ref))
    got = vidax(weights, x)

    def run(dtype):
        with reference_in(ref, dtype) as m:
            t = torch.from_numpy(x).to(dtype)
            if temporal:
                return m(t.unflatten(1, GRID)).flatten(1, 3).double().numpy()
            images = t.unflatten(1, GRID).flatten(0, 1).permute(0, 3, 1, 2)  # (B*F, C, H, W)
            return m(images).permute(0, 2, 3, 1).reshape(2, -1, DIM).double().numpy()

    err = fp32_error(vidax, weights, x, base=got)
    assert_fp32_parity(f"GLUMBConv ({'video' if temporal else 'image'})", got, run(torch.float32),
                       run(torch.float64), vidax_err=err)


SP_SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from vidax_core.attention import linear
    from vidax_core.parallel import sharding
    from vidax_core.parallel.mesh import MeshPlan, make_mesh
    from jax.sharding import NamedSharding, PartitionSpec as P

    rng = np.random.default_rng(0)
    q, k, v, qn, kn = (rng.random((2, 40, 6, 8), np.float32) for _ in range(5))
    one = np.asarray(linear.linear_attention(q, k, v, q_num=qn, k_num=kn))
    mesh = make_mesh(MeshPlan(dp=1, tp=2, sp=4))
    rules = sharding.make_rules(None)
    with sharding.activate(mesh, rules):
        put = lambda a: jax.device_put(a, NamedSharding(mesh, P(None, "sp", "tp", None)))
        out = jax.jit(lambda *a: linear.self_attention(a[0], a[1], a[2], q_num=a[3], k_num=a[4]))(
            *map(put, (q, k, v, qn, kn)))
    err = float(np.abs(np.asarray(out) - one).max()) / float(np.abs(one).max())

    from flax import nnx
    from vidax_core.nn.conv_feedforward import GLUMBConv
    from vidax_core.nn.layers import scan_blocks, stacked

    grid = (2, 2, 4)  # 16 tokens: 4 per sp shard, half a frame
    ff = stacked(lambda r: GLUMBConv(24, 60, temporal_kernel=3, rngs=r), 2, nnx.Rngs(0))
    gd, st = nnx.split(ff)
    leaves, tree = jax.tree.flatten(st)
    st = jax.tree.unflatten(tree, [jnp.asarray(rng.standard_normal(a.shape), jnp.float32) * 0.2 for a in leaves])
    run = lambda s, x: scan_blocks(gd, s, x, grid)
    x = rng.standard_normal((2, 16, 24)).astype(np.float32)
    one = np.asarray(run(st, x))
    specs = sharding.param_specs(st, rules, mesh)
    placed = nnx.from_flat_state([(k, v.replace(jax.device_put(v[...], NamedSharding(mesh, specs[k]))))
                                  for k, v in nnx.to_flat_state(st)])
    with sharding.activate(mesh, rules):
        out = jax.jit(run)(placed, jax.device_put(x, NamedSharding(mesh, P(None, "sp", None))))
    ff_err = float(np.abs(np.asarray(out) - one).max()) / float(np.abs(one).max())
    print(json.dumps({"linear": err, "ff": ff_err}))
""")


def test_sequence_parallel_linear_attention_and_conv_feedforward():
    """tp 2 x sp 4: the linear attention over 6 heads (3 per tp shard: Ulysses could not split them over sp 4) and
    the conv feed-forward split inside frames each equal one device."""
    from vidax_core.testing.devices import run_script

    out = run_script(SP_SCRIPT, python_args=("-c",), highest=True)
    assert out["linear"] <= 1e-6 and out["ff"] <= 1e-6, out
