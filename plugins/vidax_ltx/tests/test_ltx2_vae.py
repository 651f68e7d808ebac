"""LTX-2.x video VAE parity against diffusers 0.42.1's AutoencoderKLLTX2Video (torch is a test-only oracle).

Tiny random models of each generation, every parameter randomised (norm gains, biases, scale-shift tables,
latent statistics), saved with ``save_pretrained`` and read back with vidax's safetensors reader. A comparison
passes when vidax is within 4 x (the reference's fp32-vs-float64 error + vidax's own fp32 error, where measured),
against the reference run in float64 (``vidax_core.testing.tiny.wan_vae_parity.check``). Each parity check has a
wrong variant (normalisation, spatial padding, causal padding, timestep conditioning) that lands far outside its
bound.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.testing.parity import FP32_FACTOR, fp32_bound, fp32_error, max_abs  # noqa: E402
from vidax_core.testing.tiny.ltx_vae_parity import (  # noqa: E402
    RAGGED, RAGGED_LATENT, assert_same_params, check_encode, check_ragged, decode_ref as _decode_ref,
    latents as _latents, ragged_runs, random_reference, saved)
from vidax_core.testing.tiny import ltx2_original_keys  # noqa: E402
from vidax_core.testing.tiny.ltx2 import VIDEO_VAE  # noqa: E402
from vidax_core.testing.tiny.wan_vae_parity import check, tiles  # noqa: E402
from vidax_ltx import ltx2_vae as L  # noqa: E402
from vidax_ltx import vae as vae_lib  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_vae")
diffusers.utils.logging.set_verbosity_error()

#: LTX-2.0's layout at tiny widths (encoder conv_in to the latent width, then spatial, temporal, spatiotemporal x2
#: down blocks; decoder of three residual x2 upsamplers, non-causal, reflect-padded, no timestep; 32x / 8x as
#: published) and the 2.3 / 2.5 decoder (timestep-conditioned, plain upsamplers, zero padding): the tiny pipelines'.
TINY_20 = VIDEO_VAE["ltx2.0"]
TINY_25 = VIDEO_VAE["ltx2.5"]
#: The reference's other branches, decoder only: width changes through a conv_in resnet (LayerNorm and the plain
#: 1x1 ``conv_shortcut``), per-block ``upsample_type`` (indexed in decoding order), causal decoder.
TINY_PLAIN = dict(TINY_20, decoder_block_out_channels=(8, 16, 32), upsample_factor=(1, 1, 1),
                  upsample_residual=(False, False, False), upsample_type=("spatial", "temporal", "spatiotemporal"),
                  decoder_causal=True)

DECODE_T = 0.05
#: Latent tiles of 3 x 3 at stride 2, overlapping by one; every tile at least 2 latents wide (torch's reflect
#: padding needs that) on a 4 x 4 latent.
TILES = tiles(96, 96, 64, 64)
ROW_TILES = tiles(64, 64, 64, 32)


def _built(tmp_path_factory, config: dict, seed: int, name: str, with_encoder: bool = True):
    """(reference, its config.json, its saved tensors, vidax VAE loaded from its save_pretrained folder)."""
    model = random_reference(diffusers.AutoencoderKLLTX2Video, config, seed)
    cfg_json, tensors = saved(model, tmp_path_factory.mktemp(name))
    vae = L.load_ltx2_vae(L.LTX2VAEConfig.from_config(cfg_json), tensors, with_encoder=with_encoder)
    return model, cfg_json, tensors, vae


@pytest.fixture(scope="module")
def gen20(tmp_path_factory):
    return _built(tmp_path_factory, TINY_20, 0, "ltx2_vae_20")


@pytest.fixture(scope="module")
def gen25(tmp_path_factory):
    return _built(tmp_path_factory, TINY_25, 3, "ltx2_vae_25")


def _far_outside(label, wrong, ref32, ref64, own=0.0):
    """A wrong variant lands more than 100x past the parity bound."""
    bound = fp32_bound(ref32, ref64, own, factor=FP32_FACTOR)
    err = max_abs(wrong, ref64)
    print(f"{label}: wrong variant max-abs {err:.3g}, bound {bound:.3g}")
    assert err > 100 * bound, (label, err, bound)


def _reload(tensors, cfg_json, with_encoder=False, **changes):
    return L.load_ltx2_vae(L.LTX2VAEConfig.from_config(cfg_json, **changes), tensors, with_encoder=with_encoder)


# ---------------------------------------------------------------------------------------------------- config


def test_config_reads_the_reference(gen20):
    model, cfg_json, _, vae = gen20
    cfg = vae.cfg
    assert (cfg.spatial_compression_ratio, cfg.temporal_compression_ratio) == (32, 8)
    assert cfg.encoder_widths() == (8, 16, 32, 32, 64)
    np.testing.assert_array_equal(np.asarray(cfg.latents_mean, np.float32), model.latents_mean.numpy())
    np.testing.assert_array_equal(np.asarray(cfg.latents_std, np.float32), model.latents_std.numpy())
    # the defaults are the reference's, and a bool stands for every block as there
    import inspect

    ours = L.LTX2VAEConfig()
    for name, p in inspect.signature(diffusers.AutoencoderKLLTX2Video.__init__).parameters.items():
        if p.default is not inspect.Parameter.empty:
            assert getattr(ours, name) == p.default, name
    short = L.LTX2VAEConfig.from_config(dict(TINY_20, upsample_residual=False, spatio_temporal_scaling=True))
    assert short.upsample_residual == (False,) * 3 and short.spatio_temporal_scaling == (True,) * 4


def test_normalisation_helpers_match_the_pipeline(gen20):
    from diffusers import LTX2Pipeline

    model, _, _, vae = gen20
    z = _latents((2, 8, 2, 2, 3), seed=9)
    mean, std = model.latents_mean, model.latents_std
    want = LTX2Pipeline._normalize_latents(torch.from_numpy(z), mean, std, 1.0).numpy()
    np.testing.assert_allclose(L.normalize_latents(z, vae.cfg), want, rtol=1e-6, atol=1e-6)
    want = LTX2Pipeline._denormalize_latents(torch.from_numpy(z), mean, std, 1.0).numpy()
    np.testing.assert_allclose(L.denormalize_latents(z, vae.cfg), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(L.denormalize_latents(L.normalize_latents(z, vae.cfg), vae.cfg), z, atol=1e-5)
    noise = _latents(z.shape, seed=10)
    mixed = L.mix_decode_noise(z, noise, [0.05, 0.5])
    np.testing.assert_allclose(mixed[1], 0.5 * z[1] + 0.5 * noise[1], atol=1e-6)


# ---------------------------------------------------------------------------------------------------- LTX-2.0


def test_decode_matches_reference_20(gen20):
    model, cfg_json, tensors, vae = gen20
    z = _latents((2, 8, 3, 2, 3))
    ref32, ref64 = _decode_ref(model, z, None)
    got = L.decode(vae, z)
    assert got.shape == (2, 3, 17, 64, 96) and got.dtype == np.float32
    own = fp32_error(lambda zz: L.decode(vae, zz), z, base=got)
    check("LTX-2.0 decode", got, ref32, ref64, vidax_err=own)
    # can fail: zero instead of reflect padding, causal instead of symmetric time padding
    _far_outside("zero padding", L.decode(_reload(tensors, cfg_json, decoder_spatial_padding_mode="zeros"), z),
                 ref32, ref64, own)
    _far_outside("causal decoder", L.decode(_reload(tensors, cfg_json, decoder_causal=True), z), ref32, ref64, own)


def test_wrong_norm_is_caught(gen20, monkeypatch):
    """A mean-centred norm (LayerNorm without gain) in place of the per-channel RMS norm."""
    import jax
    import jax.numpy as jnp

    model, _, _, vae = gen20
    z = _latents((1, 8, 2, 2, 2), seed=4)
    ref32, ref64 = _decode_ref(model, z, None)

    def centred(x):
        x = x - jnp.mean(x, axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-8)

    monkeypatch.setattr(vae_lib, "_norm", centred)
    fresh = jax.jit(lambda zz: vae.decoder(zz, None))  # traced afresh, past the compiled program of the right norm
    wrong = np.moveaxis(np.asarray(fresh(jnp.asarray(np.moveaxis(z, 1, -1)))), -1, 1)
    _far_outside("mean-centred norm", wrong, ref32, ref64)


def test_decode_tiled_matches_reference_20(gen20):
    model, _, _, vae = gen20
    z = _latents((1, 8, 1, 4, 4), seed=2)
    ref32, ref64 = _decode_ref(model, z, None, TILES)
    assert L.decode_plan(vae.cfg, z.shape[3:], TILES).num_tiles == 4  # overlapping tiles, not one decode
    check("LTX-2.0 decode tiled", L.decode(vae, z, tiling=TILES), ref32, ref64)


@pytest.fixture(scope="module")
def ragged20(gen20):
    """The ragged 2 x 2 grid (reflect-padded decoder, zero-padded encoder) decoded and encoded padded and per tile
    shape (``ragged_runs``): the bottom and right edge tiles hold 2 real latents of 4."""
    _, _, _, vae = gen20
    z = _latents((1, 8, 2, *RAGGED_LATENT), seed=9)
    x = np.random.default_rng(10).uniform(-1, 1, (1, 3, 9, 160, 160)).astype(np.float32)
    return z, x, ragged_runs(vae_lib, vae, z, x)


def test_padded_edge_tiles_run_one_program_and_match_20(ragged20):
    """Edge tiles padded to the tile shape (their reflect padding mirrored into the padding) give what the unpadded
    tiles give, in one compile (against four)."""
    check_ragged("LTX-2.0", ragged20[2])


def test_padded_ragged_grid_matches_reference_20(gen20, ragged20):
    model, _, _, _ = gen20
    z, x, runs = ragged20
    ref32, ref64 = _decode_ref(model, z, None, RAGGED)
    check("LTX-2.0 decode ragged tiled", runs["decode"][0], ref32, ref64)
    check_encode("LTX-2.0 encode ragged tiled", model, lambda xx, t: tuple(runs["encode"][0]), x, RAGGED)


def test_encode_matches_reference_20(gen20):
    model, _, _, vae = gen20
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 9, 64, 96)).astype(np.float32)
    mean, _ = check_encode("LTX-2.0 encode", model, lambda xx, t: L.encode(vae, xx, tiling=t), x)
    assert mean.shape == (2, 8, 2, 2, 3)


def test_encode_tiled_matches_reference_20(gen20):
    """One frame, as image-to-video encodes its conditioning image."""
    model, _, _, vae = gen20
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 1, 64, 128)).astype(np.float32)
    assert L.encode_plan(vae.cfg, x.shape[3:], ROW_TILES).num_tiles == 4
    check_encode("LTX-2.0 encode tiled", model, lambda xx, t: L.encode(vae, xx, tiling=t), x, ROW_TILES)


# ------------------------------------------------------------------------------------------------ LTX-2.3 / 2.5


def test_decode_with_timestep_matches_reference_25(gen25):
    model, cfg_json, tensors, vae = gen25
    z = _latents((2, 8, 2, 2, 3), seed=5)
    t = np.array([DECODE_T, 0.5], np.float32)
    ref32, ref64 = _decode_ref(model, z, t)
    got = L.decode(vae, z, timestep=t)
    assert got.shape == (2, 3, 9, 64, 96)
    # diffusers embeds the timestep in float32 even in its float64 run: vidax's own fp32 error joins the bound
    own = fp32_error(lambda zz, tt: L.decode(vae, zz, timestep=tt), z, t, base=got)
    check("LTX-2.5 decode", got, ref32, ref64, vidax_err=own)
    # can fail: the decoder without its timestep conditioning (the same weights less the timestep tables)
    plain = {k: v for k, v in ((k, tensors[k]) for k in tensors.keys())
             if not any(s in k for s in ("time_embedder", "scale_shift_table", "timestep_scale_multiplier"))
             and not k.startswith("encoder.")}
    unconditioned = L.load_ltx2_vae(L.LTX2VAEConfig.from_config(cfg_json, timestep_conditioning=False), plain,
                                    with_encoder=False)
    _far_outside("no timestep conditioning", L.decode(unconditioned, z), ref32, ref64, own)
    with pytest.raises(UserError, match="timestep-conditioned"):
        L.decode(vae, z)


def test_decode_tiled_matches_reference_25(gen25):
    model, _, _, vae = gen25
    z = _latents((1, 8, 1, 4, 4), seed=6)
    ref32, ref64 = _decode_ref(model, z, [DECODE_T], TILES)
    own = fp32_error(lambda zz: L.decode(vae, zz, timestep=DECODE_T, tiling=TILES), z)
    check("LTX-2.5 decode tiled", L.decode(vae, z, timestep=DECODE_T, tiling=TILES), ref32, ref64, vidax_err=own)


def test_plain_decoder_branches(tmp_path_factory):
    model, cfg_json, tensors, vae = _built(tmp_path_factory, TINY_PLAIN, 7, "ltx2_vae_plain", with_encoder=False)
    assert vae.encoder is None and vae.decoder.up_blocks[1].conv_in is not None
    z = _latents((1, 8, 2, 2, 2), seed=8)
    ref32, ref64 = _decode_ref(model, z, None)
    got = L.decode(vae, z)
    assert got.shape == (1, 3, 5, 32, 32)  # x2 in space, x2 in time (less one frame), x2 in both (less one)
    check("LTX-2 decode (width changes, per-block strides, causal)", got, ref32, ref64)
    # upsample_type read reversed (as the decoder reverses every other per-block list) cannot load these weights
    from vidax_core.io.convert import ConversionError

    with pytest.raises(ConversionError, match="mis-shaped"):
        _reload(tensors, cfg_json, upsample_type=tuple(reversed(TINY_PLAIN["upsample_type"])))


# ------------------------------------------------------------------------------------------- loading and refusals


@pytest.mark.parametrize("generation", ["20", "25"])
def test_original_layout_loads_exactly_the_diffusers_params(generation, gen20, gen25):
    from diffusers.loaders.single_file_utils import convert_ltx2_vae_to_diffusers

    model, cfg_json, _, vae = gen20 if generation == "20" else gen25
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    original = {ltx2_original_keys.vae_key(k): v for k, v in state.items()}
    c = state["latents_mean"].shape[0]
    original["vae.per_channel_statistics.channel"] = np.arange(c, dtype=np.float32)
    original["vae.per_channel_statistics.mean-of-stds"] = np.ones(c, np.float32)
    # the oracle: diffusers' own single-file conversion maps the written names back onto its names (its LTX-2
    # table leaves ltx-core's last_time_embedder / last_scale_shift_table as they are)
    back = convert_ltx2_vae_to_diffusers({k: torch.from_numpy(v) for k, v in original.items()})
    back = {k.replace("decoder.last_", "decoder."): v for k, v in back.items()}
    assert set(back) == set(state), sorted(set(back) ^ set(state))[:10]
    for bare in (False, True):  # inside a whole-model file (vae.* keys), and the VAE's own file
        tensors = {k[4:]: v for k, v in original.items()} if bare else dict(original)
        if not bare:
            tensors["model.diffusion_model.proj_in.weight"] = np.zeros((2, 2), np.float32)  # the DiT's part
        assert_same_params(L.load_ltx2_vae(L.LTX2VAEConfig.from_config(cfg_json), tensors), vae)


def test_refusals(gen20):
    from vidax_core.io.convert import ConversionError

    model, cfg_json, _, _ = gen20
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    del state["decoder.mid_block.resnets.0.conv1.conv.weight"]
    with pytest.raises(ConversionError, match="missing"):
        L.load_ltx2_vae(L.LTX2VAEConfig.from_config(cfg_json), state)
    with pytest.raises(UserError, match="LTX2VideoDownBlock3D"):
        vae_lib.LTXVAE(L.LTX2VAEConfig.from_config(dict(TINY_20, down_block_types=("LTXVideo095DownBlock3D",) * 4)))
    with pytest.raises(UserError, match="decoder_spatial_padding_mode"):
        vae_lib.LTXVAE(L.LTX2VAEConfig.from_config(dict(TINY_20, decoder_spatial_padding_mode="circular")))
    with pytest.raises(UserError, match="decoder_inject_noise"):
        vae_lib.LTXVAE(L.LTX2VAEConfig.from_config(dict(TINY_20, decoder_inject_noise=True)))
    with pytest.raises(ValueError, match="statistics"):
        L.normalize_latents(np.zeros((1, 8, 1, 1, 1)), L.LTX2VAEConfig())


# ------------------------------------------------------------------------------------------------ full size


def test_published_ltx2_vae_layout_and_shapes():
    """The published LTX-2.0 VAE built abstractly (no weights): every key and shape of the reference (meta device)
    lands on a vidax parameter, in diffusers' and in the original naming; decoder and encoder trace 121 frames at
    768 x 512 <-> 16 x 16 x 24 latents."""
    import jax
    from flax import nnx

    from vidax_core.nn.state import abstract_model
    from vidax_core.testing.reference import check_full_size, meta_tensors
    from vidax_ltx.vae_convert import STATS_KEYS, original_vae_tensors, vae_rules

    ref = lambda: diffusers.AutoencoderKLLTX2Video(**L.PUBLISHED_LTX2_VAE_CONFIG)  # noqa: E731
    cfg = L.LTX2VAEConfig.from_config(L.PUBLISHED_LTX2_VAE_CONFIG)
    check_full_size(ref, vae_rules(True), lambda: vae_lib.LTXVAE(cfg), component="vae", ignore=STATS_KEYS,
                    label="published LTX-2.0 VAE")
    tensors = meta_tensors(ref)
    original = {ltx2_original_keys.vae_key(k): v for k, v in tensors.items()}
    assert sorted(original_vae_tensors(original, ltx2=True)) == sorted(tensors)
    graphdef, state, _ = abstract_model(lambda: vae_lib.LTXVAE(cfg))
    z = jax.ShapeDtypeStruct((1, 16, 16, 24, 128), np.float32)
    video = jax.eval_shape(lambda s, z: nnx.merge(graphdef, s).decoder(z, None), state, z)
    assert video.shape == (1, 121, 512, 768, 3)
    x = jax.ShapeDtypeStruct((1, 121, 512, 768, 3), np.float32)
    assert jax.eval_shape(lambda s, x: nnx.merge(graphdef, s).encoder(x), state, x).shape == (1, 16, 16, 24, 129)
