"""LTX-Video DiT parity against diffusers' LTXVideoTransformer3DModel (torch is a test-only oracle), conversion and
structure. Tolerances come from the reference's and vidax's own fp32 errors (``vidax_core.testing.parity``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_ltx.convert_dit import load_dit  # noqa: E402
from vidax_ltx.dit import LTXDiTConfig, video_coords  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_error  # noqa: E402
from vidax_core.testing.reference import reference_fixture  # noqa: E402
from vidax_core.testing.tiny.ltx import TINY_DIT_CONFIG, random_ltx_dit  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_dit")

GRID = (3, 4, 4)
FPS = 25


reference = reference_fixture(random_ltx_dit, seed=0)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    s = int(np.prod(GRID))
    latents = rng.standard_normal((2, s, TINY_DIT_CONFIG["in_channels"])).astype(np.float32)
    context = rng.standard_normal((2, 7, TINY_DIT_CONFIG["caption_channels"])).astype(np.float32) * 3
    mask = np.ones((2, 7), bool)
    mask[1, 4:] = False  # the second prompt is padded
    return latents, context, mask


def _reference(model, latents, timestep, context, mask, dtype):
    m = model.to(dtype)
    with torch.no_grad():
        out = m(hidden_states=torch.from_numpy(latents).to(dtype),
                encoder_hidden_states=torch.from_numpy(context).to(dtype),
                timestep=torch.from_numpy(timestep).to(dtype),
                encoder_attention_mask=torch.from_numpy(mask.astype(np.int64)),
                num_frames=GRID[0], height=GRID[1], width=GRID[2], rope_interpolation_scale=(8 / FPS, 32, 32),
                return_dict=False)[0]
    model.to(torch.float32)
    return out.double().numpy()


def _vidax(tensors, latents, timestep, context, mask):
    model = load_dit(LTXDiTConfig.from_config(TINY_DIT_CONFIG), tensors)
    coords = np.broadcast_to(video_coords(GRID, FPS), (latents.shape[0],) + (latents.shape[1], 3))
    fwd = jax.jit(lambda m, *a: m(*a[:3], rope_coords=a[3]))
    ctx = {"hidden": jnp.asarray(context), "mask": jnp.asarray(mask)}
    return np.asarray(fwd(model, jnp.asarray(latents), jnp.asarray(timestep), ctx, jnp.asarray(coords)), np.float64)



@pytest.mark.parametrize("per_token", [False, True], ids=["per_sample_t", "per_token_t"])
def test_parity_with_diffusers(reference, inputs, per_token):
    model_t, tensors = reference
    latents, context, mask = inputs
    if per_token:  # image-to-video: the first frame's tokens at t = 0
        t = np.full((2, latents.shape[1]), 937.5, np.float32)
        t[:, : GRID[1] * GRID[2]] = 0.0
        t[1] *= 0.5
    else:
        t = np.array([999.0, 250.5], np.float32)
    want64 = _reference(model_t, latents, t, context, mask, torch.float64)
    want32 = _reference(model_t, latents, t, context, mask, torch.float32)
    got = _vidax(tensors, latents, t, context, mask)
    assert got.shape == (2, latents.shape[1], TINY_DIT_CONFIG["out_channels"])
    # the timesteps are nudged too: diffusers embeds them in fp32 even in its float64 run, so the reference's own
    # error misses the sinusoid's rounding while vidax's differs from it by that much
    own = fp32_error(_vidax, tensors, latents, t, context, mask, base=got)
    assert_fp32_parity(f"ltx dit ({'per-token' if per_token else 'per-sample'} t)", got, want32, want64,
                       vidax_err=own, floor=1e-6)


def test_text_mask_matters(reference, inputs):
    """The padded text tokens must be masked: unmasking them changes the output far beyond the tolerance."""
    _, tensors = reference
    latents, context, mask = inputs
    t = np.array([500.0, 500.0], np.float32)
    a = _vidax(tensors, latents, t, context, mask)
    b = _vidax(tensors, latents, t, context, np.ones_like(mask))
    assert np.abs(a[0] - b[0]).max() == 0.0  # the unpadded prompt is unchanged
    assert np.abs(a[1] - b[1]).max() > 1e-3


def test_video_coords_match_reference_rope():
    """Coordinates times the RoPE equal the reference's (cos, sin) tables."""
    from diffusers.models.transformers.transformer_ltx import LTXVideoRotaryPosEmbed
    from vidax_core.nn.rope import cos_sin, ltx_angles

    dim = 32
    ref = LTXVideoRotaryPosEmbed(dim)
    cos_t, sin_t = ref(torch.zeros(1, 1, dim), *GRID, rope_interpolation_scale=(8 / FPS, 32, 32))
    cos, sin = cos_sin(ltx_angles(jnp.asarray(video_coords(GRID, FPS)), dim))
    np.testing.assert_allclose(np.repeat(np.asarray(cos), 2, -1), cos_t[0].numpy(), atol=2e-6)
    np.testing.assert_allclose(np.repeat(np.asarray(sin), 2, -1), sin_t[0].numpy(), atol=2e-6)


def test_conversion_reports_every_problem(reference):
    _, tensors = reference
    broken = dict(tensors)
    broken.pop("proj_in.weight")
    broken["transformer_blocks.0.attn1.to_q.bias"] = np.zeros(3, np.float32)
    broken["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as e:
        load_dit(LTXDiTConfig.from_config(TINY_DIT_CONFIG), broken)
    msg = str(e.value)
    assert "proj_in" in msg and "to_q" in msg and "extra.weight" in msg


def test_scale_shift_tables_stay_fp32():
    from flax import nnx

    from vidax_core.nn.state import abstract_model
    from vidax_ltx.dit import LTXDiT

    cfg = LTXDiTConfig.from_config({**TINY_DIT_CONFIG, "dtype": jnp.bfloat16})
    _, _, flat = abstract_model(lambda: LTXDiT(cfg, rngs=nnx.Rngs(0)))
    tables = {p: v for p, v in flat.items() if "scale_shift_table" in p}
    assert len(tables) == 2 and all(v.dtype == jnp.float32 for v in tables.values())
    assert flat[("proj_in", "kernel")].dtype == jnp.bfloat16


class _ValuesOnly:
    """A diffusers attention processor for the perturbed pass: the values go straight to ``to_out``."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None,
                 **kwargs):
        return attn.to_out[1](attn.to_out[0](attn.to_v(hidden_states)))


def test_perturbed_pass_skips_the_flagged_self_attentions(reference, inputs):
    """STG's perturbed pass vs the reference with the flagged blocks' self-attention replaced by its values; per
    sample flags (sample 0 skips block 1, sample 1 skips nothing); chunked like offload (carry with layer index)."""
    from flax import nnx

    model_t, tensors = reference
    latents, context, mask = inputs
    t = np.array([700.0, 700.0], np.float32)
    skip = np.array([[0.0, 1.0], [0.0, 0.0]], np.float32)
    want_plain = _reference(model_t, latents, t, context, mask, torch.float64)
    block = model_t.transformer_blocks[1].attn1
    saved = block.processor
    block.set_processor(_ValuesOnly())
    try:
        want_skip = _reference(model_t, latents, t, context, mask, torch.float64)
    finally:
        block.set_processor(saved)
    model = load_dit(LTXDiTConfig.from_config(TINY_DIT_CONFIG), tensors)
    coords = jnp.asarray(np.broadcast_to(video_coords(GRID, FPS), (2, latents.shape[1], 3)))
    ctx = {"hidden": jnp.asarray(context), "mask": jnp.asarray(mask)}
    fwd = jax.jit(lambda m, x, tt, c, r, s: m(x, tt, c, rope_coords=r, stg_skip=s, perturbed=True))
    got = np.asarray(fwd(model, jnp.asarray(latents), jnp.asarray(t), ctx, coords, jnp.asarray(skip)), np.float64)
    err0 = float(np.abs(got[0] - want_skip[0]).max())
    err1 = float(np.abs(got[1] - want_plain[1]).max())
    print(f"ltx dit perturbed pass: max_abs skip={err0:.3e} plain={err1:.3e}")
    assert err0 <= 1e-5 and err1 <= 1e-5
    assert np.abs(want_skip[0] - want_plain[0]).max() > 1e-2  # skipping matters

    # block by block, as the offload executor drives it
    carry, aux = model.pre(jnp.asarray(latents), jnp.asarray(t), ctx, coords, jnp.asarray(skip), True)
    graphdef, state = nnx.split(model.blocks)
    for i in range(TINY_DIT_CONFIG["num_layers"]):
        carry = model.run_block_group("blocks", graphdef, jax.tree.map(lambda a: a[i:i + 1], state), carry, aux)
    chunked = np.asarray(model.post(carry, aux), np.float64)
    np.testing.assert_allclose(chunked, got, atol=1e-6)
