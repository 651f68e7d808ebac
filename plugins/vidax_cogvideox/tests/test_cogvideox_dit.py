"""CogVideoX DiT parity against diffusers' CogVideoXTransformer3DModel (torch is a test-only oracle) for each
published architecture variant, plus conversion and position-table checks. Tolerances come from the reference's
own fp32 error (fp32 vs float64 on the same inputs)."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_cogvideox.convert_dit import load_dit  # noqa: E402
from vidax_cogvideox.dit import CogVideoXDiTConfig  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.tiny.cogvideox import dit_kwargs, random_cogvideox_dit  # noqa: E402

pytestmark = pytest.mark.xdist_group("cogvideox_dit")

LATENT_FRAMES = 3  # 9 pixel frames
LATENT_HW = (4, 4)  # 32 x 32 pixels
TEXT_LEN = 12


def _reference_rope(model, frames):
    """The pipelines' own RoPE tables (their ``_prepare_rotary_positional_embeddings``)."""
    from diffusers import CogVideoXPipeline

    if not model.config.use_rotary_positional_embeddings:
        return None
    ns = types.SimpleNamespace(transformer=model, vae_scale_factor_spatial=8)
    h, w = (8 * s for s in LATENT_HW)
    return CogVideoXPipeline._prepare_rotary_positional_embeddings(ns, h, w, frames, torch.device("cpu"))


def _inputs(variant, seed=0):
    kw = dit_kwargs(variant)
    rng = np.random.default_rng(seed)
    frames = LATENT_FRAMES + (1 if kw.get("patch_size_t") else 0)  # 1.5 pads to an even frame count
    latents = rng.standard_normal((2, frames, kw["in_channels"]) + LATENT_HW).astype(np.float32)
    context = rng.standard_normal((2, TEXT_LEN, kw["text_embed_dim"])).astype(np.float32) * 3
    t = np.array([999.0, 250.0], np.float32)
    ofs = np.full((2,), 2.0, np.float32) if kw.get("ofs_embed_dim") else None
    return latents, context, t, ofs


def _reference(model, latents, context, t, ofs, dtype):
    m = model.to(dtype)
    rope = _reference_rope(model, latents.shape[1])
    with torch.no_grad():
        out = m(hidden_states=torch.from_numpy(latents).to(dtype),
                encoder_hidden_states=torch.from_numpy(context).to(dtype), timestep=torch.from_numpy(t).to(dtype),
                ofs=None if ofs is None else torch.from_numpy(ofs).to(dtype), image_rotary_emb=rope,
                return_dict=False)[0]
    model.to(torch.float32)
    return out.double().numpy()


def _vidax(variant, tensors, latents, context, t, ofs, **overrides):
    model = load_dit(CogVideoXDiTConfig.from_config({**dit_kwargs(variant), **overrides}), tensors)
    args = (jnp.asarray(latents), jnp.asarray(t), jnp.asarray(context))
    if ofs is None:
        out = jax.jit(lambda m, *a: m(*a))(model, *args)
    else:
        out = jax.jit(lambda m, *a: m(*a[:3], ofs=a[3]))(model, *args, jnp.asarray(ofs))
    return np.asarray(out, np.float64)


def _check(name, got, want32, want64):
    ref_err = float(np.max(np.abs(want32 - want64)))
    err = float(np.max(np.abs(got - want64)))
    rel = float(np.linalg.norm(got - want64) / np.linalg.norm(want64))
    print(f"{name}: max_abs={err:.3e} rel={rel:.3e} (reference fp32 vs fp64 max_abs={ref_err:.3e}, |ref|max="
          f"{np.abs(want64).max():.3f})")
    assert err <= max(8 * ref_err, 1e-6), (err, ref_err)


@pytest.mark.parametrize("variant", ["2b", "5b", "5b-i2v", "1.5", "1.5-i2v"])
def test_parity_with_diffusers(variant):
    model = random_cogvideox_dit(variant, seed=1)
    tensors = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    latents, context, t, ofs = _inputs(variant)
    want64 = _reference(model, latents, context, t, ofs, torch.float64)
    want32 = _reference(model, latents, context, t, ofs, torch.float32)
    got = _vidax(variant, tensors, latents, context, t, ofs)
    assert got.shape == want64.shape
    _check(f"cogvideox dit {variant}", got, want32, want64)


def test_learned_table_only_at_its_frame_count():
    """5B-I2V adds its learned table only at the training frame count; other counts get the sin-cos table, as in
    the reference."""
    model = random_cogvideox_dit("5b-i2v", seed=2, sample_frames=5)  # 2 latent frames, not 3
    tensors = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    latents, context, t, ofs = _inputs("5b-i2v")
    want64 = _reference(model, latents, context, t, ofs, torch.float64)
    want32 = _reference(model, latents, context, t, ofs, torch.float32)
    got = _vidax("5b-i2v", tensors, latents, context, t, ofs, sample_frames=5)
    _check("cogvideox dit 5b-i2v at another frame count", got, want32, want64)


def test_sincos_table_matches_reference():
    from diffusers.models.embeddings import get_3d_sincos_pos_embed

    from vidax_cogvideox.positions import sincos_3d

    want = get_3d_sincos_pos_embed(64, (5, 3), 4, 1.875, 1.0, output_type="pt").flatten(0, 1).double().numpy()
    np.testing.assert_allclose(sincos_3d(64, (4, 3, 5), 1.875, 1.0), want, rtol=0, atol=1e-12)


def test_conversion_reports_every_problem():
    model = random_cogvideox_dit("5b", seed=3)
    broken = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    broken.pop("patch_embed.proj.weight")
    broken["transformer_blocks.0.attn1.to_q.bias"] = np.zeros(3, np.float32)
    broken["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as e:
        load_dit(CogVideoXDiTConfig.from_config(dit_kwargs("5b")), broken)
    msg = str(e.value)
    assert "patch_proj" in msg and "to_q" in msg and "extra.weight" in msg
