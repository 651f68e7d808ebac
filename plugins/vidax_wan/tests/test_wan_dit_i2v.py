"""Wan DiT image-to-video parts and per-token timesteps: parity against diffusers' WanTransformer3DModel.

* Wan 2.1 I2V: image embedder + image key/value cross-attention (``image_dim`` / ``added_kv_proj_dim``), the
  condition channels concatenated by the caller (in_channels = latent + mask + condition);
* Wan 2.1 FLF2V: the image embedder's learned ``pos_embed`` over first- and last-frame tokens;
* Wan 2.2 TI2V (diffusers ``expand_timesteps``): per-token timesteps (B, S) -> per-token modulation and output head;
* conversion: image keys in DIT_RULES, ``norm_added_q`` ignored, missing / unexpected image keys reported;
* the I2V + per-token forward under a dp1/sp2/tp2 mesh (4 fake CPU devices, subprocess) against the plain one.

torch / diffusers are test-only oracles. All parameters (biases, norms, pos_embed included) are randomised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.testing.devices import xla_flags

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_wan.convert_dit import DIT_IGNORE, DIT_RULES, load_dit  # noqa: E402
from vidax_wan.dit import WanDiT, WanDiTConfig  # noqa: E402
from vidax_core.testing.tiny.wan import TINY_DIT_CONFIG  # noqa: E402

TEXT_LEN = 512  # diffusers' WanAttnProcessor hard-codes 512 text tokens after the image tokens
BASE = dict(TINY_DIT_CONFIG)
# Wan 2.1 I2V-like: 4 latent + 4 mask + 4 condition channels in, 4 out; CLIP-like image tokens of width 16.
I2V = dict(BASE, in_channels=12, image_dim=16, added_kv_proj_dim=24)
FLF2V = dict(I2V, pos_embed_seq_len=10)  # 2 x 5 image tokens (first and last frame)
# Wan 2.2 TI2V-5B-like (no image attention, per-token timesteps): other widths than BASE.
TI2V = dict(BASE, num_attention_heads=3, attention_head_dim=12, in_channels=6, out_channels=6, ffn_dim=40,
            text_dim=20, freq_dim=20)

MODELS = {"i2v": I2V, "flf2v": FLF2V, "ti2v": TI2V, "t2v": BASE}


def _reference(conf: dict, seed: int):
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    kwargs = dict(conf, patch_size=tuple(conf["patch_size"]))
    model = WanTransformer3DModel(**kwargs).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.1)
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)  # norm gammas around 1 but not exactly 1
    tensors = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return model, tensors


_cache: dict = {}


def reference(name: str):
    if name not in _cache:
        model_t, tensors = _reference(MODELS[name], seed=len(_cache))
        cfg = WanDiTConfig.from_config(MODELS[name])
        _cache[name] = (model_t, tensors, cfg, load_dit(cfg, tensors))
    return _cache[name]


_fwd = jax.jit(lambda m, *a: m(*a))


def _torch(model_t, latents, timestep, context, image=None):
    with torch.no_grad():
        return model_t(
            torch.from_numpy(latents), torch.from_numpy(timestep), torch.from_numpy(context),
            encoder_hidden_states_image=None if image is None else torch.from_numpy(image), return_dict=False,
        )[0].numpy()


def _check(name: str, got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == np.float32
    max_abs = float(np.max(np.abs(got - want)))
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"{name}: max_abs={max_abs:.3e} rel={rel:.3e} (|ref|max={np.abs(want).max():.3f})")
    assert rel <= 1e-5, rel
    assert max_abs <= 1e-5, max_abs


def _ti2v_timesteps(b: int, grid: tuple[int, int, int], ts) -> np.ndarray:
    """diffusers' expand_timesteps pattern: the first latent frame (the given image) at t = 0, the rest at t."""
    f, h, w = grid
    mask = np.ones((f, h, w), np.float32)
    mask[0] = 0.0
    return np.stack([(mask * t).reshape(-1) for t in ts[:b]]).astype(np.float32)


def test_i2v_parity():
    model_t, _, cfg, model = reference("i2v")
    assert cfg.is_i2v and cfg.in_channels == 12
    rng = np.random.default_rng(0)
    noisy = rng.standard_normal((2, 4, 3, 8, 8)).astype(np.float32)
    cond = rng.standard_normal((2, 8, 3, 8, 8)).astype(np.float32)  # mask (4) + condition latents (4)
    latents = np.concatenate([noisy, cond], axis=1)  # the caller concatenates; the DiT sees 12 channels
    timestep = np.array([999.0, 250.5], np.float32)
    context = rng.standard_normal((2, TEXT_LEN, 16)).astype(np.float32)
    image = rng.standard_normal((2, 5, 16)).astype(np.float32)
    want = _torch(model_t, latents, timestep, context, image)
    got = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context, image)))
    _check("wan i2v parity", got, want)
    # the image attention matters (otherwise the parity above would not test it)
    no_img = np.asarray(_fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context))))
    assert float(np.linalg.norm(no_img - want) / np.linalg.norm(want)) > 1e-2
    with pytest.raises(ValueError, match="in_channels=12"):
        model(jnp.asarray(noisy), jnp.asarray(timestep), jnp.asarray(context), jnp.asarray(image))


def test_i2v_per_token_timesteps_parity():
    model_t, _, _, model = reference("i2v")
    rng = np.random.default_rng(3)
    latents = rng.standard_normal((2, 12, 2, 4, 6)).astype(np.float32)
    timestep = _ti2v_timesteps(2, (2, 2, 3), [700.0, 35.0])
    context = rng.standard_normal((2, TEXT_LEN, 16)).astype(np.float32)
    image = rng.standard_normal((2, 5, 16)).astype(np.float32)
    want = _torch(model_t, latents, timestep, context, image)
    got = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context, image)))
    _check("wan i2v per-token parity", got, want)


def test_flf2v_pos_embed_parity():
    model_t, tensors, cfg, model = reference("flf2v")
    assert np.abs(tensors["condition_embedder.image_embedder.pos_embed"]).max() > 0
    rng = np.random.default_rng(1)
    latents = rng.standard_normal((2, 12, 3, 8, 8)).astype(np.float32)
    timestep = np.array([500.0, 10.0], np.float32)
    context = rng.standard_normal((2, TEXT_LEN, 16)).astype(np.float32)
    # diffusers' layout: (2B, 5, D) = [first, last, first, last]; vidax: (B, 10, D) [first; last] per sample
    image_pairs = rng.standard_normal((4, 5, 16)).astype(np.float32)
    want = _torch(model_t, latents, timestep, context, image_pairs)
    image = image_pairs.reshape(2, 10, 16)
    got = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context, image)))
    _check("wan flf2v parity", got, want)
    got_diffusers_layout = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context, image_pairs)))
    np.testing.assert_allclose(np.asarray(got_diffusers_layout), np.asarray(got), atol=1e-6, rtol=0)


def test_per_token_timesteps_parity():
    model_t, _, _, model = reference("t2v")
    rng = np.random.default_rng(2)
    latents = rng.standard_normal((2, 4, 3, 8, 8)).astype(np.float32)
    timestep = _ti2v_timesteps(2, (3, 4, 4), [999.0, 250.5])
    assert timestep.shape == (2, 48) and len(np.unique(timestep)) == 3
    context = rng.standard_normal((2, 7, 16)).astype(np.float32)
    want = _torch(model_t, latents, timestep, context)
    got = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context)))
    _check("wan per-token timestep parity", got, want)
    # a constant per-token timestep is the (B,) timestep
    flat = np.full((2, 48), 321.0, np.float32)
    a = _fwd(model, jnp.asarray(latents), jnp.asarray(flat), jnp.asarray(context))
    b = _fwd(model, jnp.asarray(latents), jnp.asarray(flat[:, 0]), jnp.asarray(context))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="per token"):
        model(jnp.asarray(latents), jnp.asarray(timestep[:, :40]), jnp.asarray(context))


def test_ti2v_like_parity():
    """Wan 2.2 TI2V step as diffusers' I2V pipeline with expand_timesteps: the first latent frame is replaced by
    the encoded image and its tokens get t = 0."""
    model_t, _, cfg, model = reference("ti2v")
    assert not cfg.is_i2v and cfg.dim == 36
    rng = np.random.default_rng(4)
    b, grid = 2, (3, 3, 4)
    noisy = rng.standard_normal((b, 6, 3, 6, 8)).astype(np.float32)
    cond = rng.standard_normal((b, 6, 1, 6, 8)).astype(np.float32)
    mask = np.ones((1, 1, 3, 6, 8), np.float32)
    mask[:, :, 0] = 0.0
    latents = ((1 - mask) * cond + mask * noisy).astype(np.float32)
    timestep = _ti2v_timesteps(b, grid, [880.0, 120.0])
    np.testing.assert_array_equal(timestep[0], (mask[0, 0][:, ::2, ::2] * 880.0).reshape(-1))
    context = rng.standard_normal((b, 9, 20)).astype(np.float32)
    want = _torch(model_t, latents, timestep, context)
    got = _fwd(model, *(jnp.asarray(a) for a in (latents, timestep, context)))
    _check("wan ti2v-like parity", got, want)


def test_staged_forward_with_image_context():
    """pre -> run_block_group (one layer at a time) -> post, as an offload executor drives it."""
    _, _, cfg, model = reference("i2v")
    rng = np.random.default_rng(5)
    latents = jnp.asarray(rng.standard_normal((1, 12, 2, 4, 4)).astype(np.float32))
    timestep = jnp.asarray(_ti2v_timesteps(1, (2, 2, 2), [600.0]))
    context = jnp.asarray(rng.standard_normal((1, 6, 16)).astype(np.float32))
    image = jnp.asarray(rng.standard_normal((1, 5, 16)).astype(np.float32))

    @jax.jit
    def both(model, latents, timestep, context, image):
        full = model(latents, timestep, context, image)
        x, aux = model.pre(latents, timestep, context, image)
        assert aux["img_ctx"].shape == (1, 5, cfg.dim) and aux["tproj"].shape == (1, 8, 6, cfg.dim)
        graphdef, state = model.split_blocks()
        for i in range(cfg.num_layers):
            x = model.run_block_group("blocks", graphdef, jax.tree.map(lambda a: a[i : i + 1], state), x, aux)
        return full, model.post(x, aux, latents.shape)

    full, staged = both(model, latents, timestep, context, image)
    np.testing.assert_allclose(np.asarray(staged), np.asarray(full), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# Conversion
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["i2v", "flf2v"])
def test_every_param_has_a_rule(name):
    _, tensors, cfg, _ = reference(name)
    _, _, flat = abstract_model(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
    hit = set()
    for key in tensors:
        m = next((r.match(key) for r in DIT_RULES if r.match(key) is not None), None)
        assert m is not None, f"no rule for {key}"
        hit.add(m[0])
    assert hit == set(flat)
    assert ("blocks", "attn2", "add_k_proj", "kernel") in flat and ("image_norm1", "scale") in flat
    assert ("blocks", "attn1", "add_k_proj", "kernel") not in flat  # self-attention has no image projections
    assert (("image_pos_embed",) in flat) == (name == "flf2v")


def test_conversion_ignores_norm_added_q_and_reports_image_keys():
    _, tensors, cfg, _ = reference("i2v")
    with_q = dict(tensors)
    with_q["blocks.0.attn2.norm_added_q.weight"] = np.ones((24,), np.float32)
    with_q["blocks.1.attn2.norm_added_q.weight"] = np.ones((24,), np.float32)
    load_dit(cfg, with_q)  # ignored, as diffusers' _keys_to_ignore_on_load_unexpected
    assert any(__import__("re").fullmatch(p, "blocks.0.attn2.norm_added_q.weight") for p in DIT_IGNORE)

    broken = dict(tensors)
    del broken["blocks.1.attn2.add_k_proj.weight"]
    del broken["condition_embedder.image_embedder.norm2.bias"]
    with pytest.raises(ConversionError) as exc:
        load_dit(cfg, broken)
    err = exc.value
    assert "image_norm2/bias" in err.missing
    assert any(m.startswith("blocks/attn2/add_k_proj/kernel layers [1]") for m in err.missing)
    assert not err.unexpected and not err.mismatched

    # an I2V checkpoint for a T2V config: every image key is unexpected (and the patch embedding mis-shaped)
    t2v_cfg = WanDiTConfig.from_config(dict(I2V, image_dim=None, added_kv_proj_dim=None))
    with pytest.raises(ConversionError) as exc:
        load_dit(t2v_cfg, tensors)
    err = exc.value
    assert any(u.startswith("blocks.0.attn2.add_v_proj.weight") for u in err.unexpected)
    assert any(u.startswith("condition_embedder.image_embedder.ff.net.0.proj.weight") for u in err.unexpected)


def test_image_context_needs_image_attention():
    _, _, _, model = reference("t2v")
    x = jnp.zeros((1, 4, 1, 2, 2))
    with pytest.raises(ValueError, match="added_kv_proj_dim"):
        model(x, jnp.zeros((1,)), jnp.zeros((1, 3, 16)), jnp.zeros((1, 5, 16)))


# ----------------------------------------------------------------------------------------------------------------
# Sharded (dp1 / sp2 / tp2 on fake CPU devices)
# ----------------------------------------------------------------------------------------------------------------

SHARDED_SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "i2v_sharded.py")


def test_sharded_i2v_per_token_forward():
    env = dict(os.environ, XLA_FLAGS=xla_flags(4), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, SHARDED_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"wan i2v sharded dp1/sp2/tp2 vs plain: rel={r['rel']:.3e}; all-to-all={r['all_to_all']}")
    assert r["rel"] < 1e-5
    assert r["all_to_all"] == 4  # Ulysses around self-attention only; text and image cross-attention need none
    assert r["all_reduce"] >= 1
