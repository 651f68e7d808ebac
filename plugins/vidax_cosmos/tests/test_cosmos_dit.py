"""Cosmos-Predict2.5 DiT parity against diffusers' CosmosTransformer3DModel (torch is a test-only oracle), and the
conversion's error report. Tolerances come from the reference's own fp32 error (fp32 vs float64, same inputs)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.reference import reference_fixture  # noqa: E402
from vidax_cosmos.convert_dit import load_dit  # noqa: E402
from vidax_cosmos.dit import CosmosDiTConfig  # noqa: E402
from vidax_cosmos.tiny import TINY_DIT, random_cosmos_dit  # noqa: E402

pytestmark = pytest.mark.xdist_group("cosmos_dit")

B, F, H, W, L = 2, 3, 4, 6, 7
C = TINY_DIT["out_channels"]


reference = reference_fixture(random_cosmos_dit, seed=0)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((B, C, F, H, W)).astype(np.float32)
    context = rng.standard_normal((B, L, TINY_DIT["crossattn_proj_in_channels"])).astype(np.float32)
    cond = np.zeros((B, 1, F, H, W), np.float32)
    cond[:, :, :1] = 1.0  # the first latent frame is the clean conditioning frame
    padding = (rng.random((1, 1, H, W)) > 0.5).astype(np.float32)
    t = np.full((B, 1, F, 1, 1), 0.8, np.float32)
    t[:, :, 0] = 1e-4  # conditional_frame_timestep
    t[1, :, 1:] = 0.35
    return latents, t, context, cond, padding


def _reference(model, latents, t, context, cond, padding, dtype):
    m = model.to(dtype)

    def f(a):
        return torch.from_numpy(a).to(dtype)

    with torch.no_grad():
        out = m(hidden_states=f(latents), timestep=f(t), encoder_hidden_states=f(context), condition_mask=f(cond),
                padding_mask=f(padding), return_dict=False)[0]
    model.to(torch.float32)
    return out.double().numpy()


def _vidax(tensors, latents, t, context, cond, padding, cfg=None):
    model = load_dit(cfg or CosmosDiTConfig.from_config(TINY_DIT), tensors)
    fwd = jax.jit(lambda m, x, tt, c, cm, pm: m(x, tt, c, condition_mask=cm, padding_mask=pm))
    pad = np.broadcast_to(padding[:, 0], (latents.shape[0],) + padding.shape[2:])[:, None]
    out = fwd(model, jnp.asarray(latents), jnp.asarray(t.reshape(t.shape[0], -1)), jnp.asarray(context),
              jnp.asarray(cond), jnp.asarray(pad))
    return np.asarray(out, np.float64)


def _check(name, got, want32, want64, factor=8):
    ref_err = float(np.max(np.abs(want32 - want64)))
    err = float(np.max(np.abs(got - want64)))
    rel = float(np.linalg.norm(got - want64) / np.linalg.norm(want64))
    print(f"{name}: max_abs={err:.3e} rel={rel:.3e} (reference fp32 vs fp64 max_abs={ref_err:.3e}, |ref|max="
          f"{np.abs(want64).max():.3f})")
    assert err <= max(factor * ref_err, 1e-6), (err, ref_err)


def test_parity_with_diffusers(reference, inputs):
    model_t, tensors = reference
    want64 = _reference(model_t, *inputs, torch.float64)
    want32 = _reference(model_t, *inputs, torch.float32)
    got = _vidax(tensors, *inputs)
    assert got.shape == (B, C, F, H, W)
    _check("cosmos dit", got, want32, want64)


def test_every_input_matters(reference, inputs):
    """The condition mask, padding mask, per-frame timesteps and the text each change the output (so the parity
    test above covers their channels / weights)."""
    _, tensors = reference
    latents, t, context, cond, padding = inputs
    base = _vidax(tensors, *inputs)
    variants = {
        "condition_mask": (latents, t, context, np.zeros_like(cond), padding),
        "padding_mask": (latents, t, context, cond, np.zeros_like(padding)),
        "frame_timesteps": (latents, np.full_like(t, 0.8), context, cond, padding),
        "text": (latents, t, context[::-1].copy(), cond, padding),
    }
    for name, args in variants.items():
        assert np.abs(_vidax(tensors, *args) - base).max() > 1e-3, name


def test_conversion_reports_every_problem(reference):
    _, tensors = reference
    broken = dict(tensors)
    broken.pop("patch_embed.proj.weight")
    broken["transformer_blocks.0.attn1.to_q.weight"] = np.zeros((3, 3), np.float32)
    broken["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as e:
        load_dit(CosmosDiTConfig.from_config(TINY_DIT), broken)
    msg = str(e.value)
    assert "patch_embed" in msg and "to_q" in msg and "extra.weight" in msg


def test_bf16_weights_keep_fp32_norms_and_stay_close(reference, inputs):
    """The bf16 policy: matmul weights bf16, norm gains fp32; the output stays within bf16 rounding of fp32."""
    from flax import nnx

    from vidax_core.nn.state import abstract_model
    from vidax_cosmos.dit import CosmosDiT

    cfg = CosmosDiTConfig.from_config({**TINY_DIT, "dtype": jnp.bfloat16})
    _, _, flat = abstract_model(lambda: CosmosDiT(cfg, rngs=nnx.Rngs(0)))
    assert flat[("patch_embed", "kernel")].dtype == jnp.bfloat16
    assert flat[("time_norm", "scale")].dtype == jnp.float32
    assert flat[("blocks", "attn1", "norm_q", "scale")].dtype == jnp.float32
    _, tensors = reference
    full = _vidax(tensors, *inputs)
    half = _vidax(tensors, *inputs, cfg=cfg)
    rel = float(np.linalg.norm(half - full) / np.linalg.norm(full))
    print(f"cosmos dit bf16 vs fp32: rel {rel:.2e}")
    assert np.isfinite(half).all() and rel < 3e-2
