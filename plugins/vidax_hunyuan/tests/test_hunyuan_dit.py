"""HunyuanVideo DiT parity against diffusers' HunyuanVideoTransformer3DModel (torch is a test-only oracle): text-to-
video with a padded text mask, and the image-to-video token_replace variant; conversion and structure."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.checks import logical_axes  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_error  # noqa: E402
from vidax_core.testing.reference import reference_in, state_arrays  # noqa: E402
from vidax_hunyuan.convert_dit import load_dit  # noqa: E402
from vidax_hunyuan.dit import HunyuanDiT, HunyuanDiTConfig  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan_dit")

TINY = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=2,
            num_single_layers=2, num_refiner_layers=2, mlp_ratio=2.0, patch_size=2, patch_size_t=1,
            qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=12, pooled_projection_dim=8,
            rope_theta=256.0, rope_axes_dim=(4, 6, 6))


def make_reference(**over):
    from diffusers import HunyuanVideoTransformer3DModel

    torch.manual_seed(0)
    cfg = dict(TINY, **over)
    model = HunyuanVideoTransformer3DModel(**cfg).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.15)
            if "norm" in name and name.endswith("weight") and p.ndim == 1:
                p.add_(1.0)
    tensors = state_arrays(model)
    return model, tensors, HunyuanDiTConfig.from_config(cfg)


@pytest.fixture(scope="module")
def t2v():
    return make_reference()


@pytest.fixture(scope="module")
def i2v():
    return make_reference(image_condition_type="token_replace")


def make_inputs(batch=2, frames=3, size=8, length=7):
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((batch, 4, frames, size, size)).astype(np.float32)
    timestep = np.array([999.0, 250.5][:batch], np.float32)
    hidden = (2.0 * rng.standard_normal((batch, length, 12))).astype(np.float32)
    mask = np.ones((batch, length), np.int64)
    mask[0, 4:] = 0  # first sample padded after 4 tokens
    pooled = rng.standard_normal((batch, 8)).astype(np.float32)
    guidance = np.array([6000.0, 3500.0][:batch], np.float32)
    return latents, timestep, hidden, mask, pooled, guidance


def run_reference(model, inputs, dtype=torch.float32):
    """The reference output; in float64 (sinusoids included: the float32 rounding of the embedded guidance
    ``6000 * f`` is part of the reference's own fp32 error) to measure the fp32 reference's own error."""
    latents, timestep, hidden, mask, pooled, guidance = inputs

    def t(a):
        return torch.from_numpy(a).to(dtype)

    with reference_in(model, dtype) as m:
        out = m(t(latents), t(timestep), t(hidden), torch.from_numpy(mask), t(pooled), guidance=t(guidance),
                return_dict=False)[0]
    return out.double().numpy()


_FWD = jax.jit(lambda m, *a: m(*a))


def run_vidax(cfg, tensors, inputs, **ctx_over):
    latents, timestep, hidden, mask, pooled, guidance = inputs
    model = load_dit(cfg, tensors)
    ctx = {"hidden": jnp.asarray(hidden), "mask": jnp.asarray(mask), "pooled": jnp.asarray(pooled)}
    ctx.update(ctx_over)
    return np.asarray(_FWD(model, jnp.asarray(latents), jnp.asarray(timestep), ctx, jnp.asarray(guidance)))


@pytest.mark.parametrize("variant,guidance", [("t2v", "small"), ("t2v", "pipeline"), ("i2v", "small")])
def test_parity_with_diffusers(variant, guidance, request):
    """``pipeline``: the embedded guidance the pipeline feeds (6000 = 6 * 1000), whose float32 sinusoid dominates
    the reference's own error; ``small``: guidance values whose fp32 floor is near 1e-6 (a tight bound)."""
    model, tensors, cfg = request.getfixturevalue(variant)
    inputs = make_inputs()
    if guidance == "small":
        inputs = inputs[:5] + (np.array([1.0, 3.0], np.float32),)
    want32 = run_reference(model, inputs)
    want64 = run_reference(model, inputs, torch.float64)
    got = run_vidax(cfg, tensors, inputs)
    own = fp32_error(lambda w, x: run_vidax(cfg, w, x), tensors, inputs, base=got)
    assert_fp32_parity(f"hunyuan dit {variant} (guidance {guidance})", got, want32, want64, vidax_err=own)


def test_mask_matters(t2v):
    """The padded text tokens change the result when unmasked: the parity above can see a missing mask."""
    model, tensors, cfg = t2v
    inputs = make_inputs()
    want = run_reference(model, inputs)
    got = run_vidax(cfg, tensors, inputs, mask=jnp.ones_like(jnp.asarray(inputs[3])))
    assert np.abs(got[0] - want[0]).max() / np.abs(want[0]).max() > 1e-3
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-4 * np.abs(want[1]).max())


def test_token_replace_matters(t2v, i2v):
    """The token_replace variant differs from plain modulation on the first frame only when t != 0."""
    _, tensors, cfg = i2v
    inputs = make_inputs()
    plain = run_vidax(HunyuanDiTConfig.from_config(TINY), tensors, inputs)
    tr = run_vidax(cfg, tensors, inputs)
    assert np.abs(plain - tr).max() > 1e-3


def test_conversion_reports_problems(t2v):
    _, tensors, cfg = t2v
    broken = dict(tensors)
    del broken["transformer_blocks.1.attn.norm_added_k.weight"]
    broken["single_transformer_blocks.0.linear1.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ConversionError) as exc:
        load_dit(cfg, broken)
    assert any(m.startswith("double_blocks/txt/norm_k/scale layers [1]") for m in exc.value.missing)
    assert exc.value.unexpected == ["single_transformer_blocks.0.linear1.weight"]


def test_structure_and_logical_axes(t2v):
    _, _, cfg = t2v
    specs, flat = logical_axes(lambda: HunyuanDiT(cfg, rngs=nnx.Rngs(0)))
    assert specs[("double_blocks", "img", "q", "kernel")] == ("layers", "embed", "heads")
    assert specs[("double_blocks", "txt_out", "kernel")] == ("layers", "heads", "embed")
    assert specs[("single_blocks", "out_mlp", "kernel")] == ("layers", "mlp", "embed")
    assert specs[("single_blocks", "out_attn", "kernel")] == ("layers", "heads", "embed")
    assert flat[("double_blocks", "img", "q", "kernel")].shape[0] == 2
    assert not any(p[0] == "refiner" and specs[p] and specs[p][0] == "layers" for p in specs)
