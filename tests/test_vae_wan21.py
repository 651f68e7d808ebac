"""Parity of the Wan 2.1 VAE against diffusers' AutoencoderKLWan on a tiny random model (torch is the oracle).

Tiling on and off, decode and encode. Tolerances come from the reference's own fp32 error: the same diffusers model
in float64 is the truth, and vidax may be at most ``FACTOR`` times as far from it as diffusers in fp32 is.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.testing.tiny.wan_vae_parity import check, check_posterior, random_wan_vae, run, tiles  # noqa: E402

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.vae import wan21 as vae_mod  # noqa: E402
from vidax_core.vae.convert_wan21 import load_vae  # noqa: E402
from vidax_core.vae.tiling import TilingOptions  # noqa: E402
from vidax_core.vae.wan21 import WanVAEConfig, decode_plan, decode_video, encode_plan, encode_video  # noqa: E402


TINY = dict(
    base_dim=8,
    z_dim=4,
    dim_mult=[1, 2, 2, 2],
    num_res_blocks=1,
    attn_scales=[],
    temperal_downsample=[False, True, True],
    dropout=0.0,
    latents_mean=[0.1, -0.2, 0.3, 0.0],
    latents_std=[1.5, 0.7, 2.0, 1.1],
)


@pytest.fixture(scope="module")
def models():
    ref = random_wan_vae(TINY)
    cfg = WanVAEConfig.from_config({**dict(ref.config), "_class_name": "AutoencoderKLWan", "unknown": 1})
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    return ref, cfg, tensors, load_vae(cfg, tensors)


@pytest.fixture(scope="module")
def ref64(models):
    return copy.deepcopy(models[0]).double()


def _latents(frames: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, TINY["z_dim"], frames, 4, 4)).astype(np.float32)


def test_config_from_diffusers_json():
    cfg = WanVAEConfig.from_config(
        {"_class_name": "AutoencoderKLWan", "base_dim": 96, "z_dim": 16, "dim_mult": [1, 2, 4, 4],
         "temperal_downsample": [False, True, True], "attn_scales": [], "num_res_blocks": 2}
    )
    assert cfg.dim_mult == (1, 2, 4, 4) and cfg.temperal_upsample == (True, True, False)
    assert len(cfg.latents_mean) == 16 and cfg.latents_std[0] == pytest.approx(2.8184)
    with pytest.raises(NotImplementedError):
        vae_mod.WanVAE(WanVAEConfig(is_residual=True))


def test_decode_matches_diffusers(models, ref64):
    ref, _, _, vae = models
    z = _latents(3)
    expected = run(ref, "decode", z)
    calls = []
    got = np.asarray(vae.decode(z, on_chunk=lambda d, n: calls.append((d, n))))
    assert got.shape == expected.shape == (1, 3, 9, 32, 32)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    print(f"saturated {np.mean(np.abs(expected) >= 1):.3f}")
    check("decode", got, expected, run(ref64, "decode", z))


def _pipeline_decode(model, cfg, z: np.ndarray, scale: int) -> np.ndarray:
    """pipeline_wan.py's decode steps (de-normalise, decode, postprocess to [0, 1] channel-last)
    in the model's dtype."""
    from diffusers.video_processor import VideoProcessor

    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        latents = torch.from_numpy(z).to(dtype)
        mean = torch.tensor(cfg.latents_mean).view(1, cfg.z_dim, 1, 1, 1).to(dtype)
        inv_std = 1.0 / torch.tensor(cfg.latents_std).view(1, cfg.z_dim, 1, 1, 1).to(dtype)
        video = model.decode(latents / inv_std + mean, return_dict=False)[0]
        return VideoProcessor(vae_scale_factor=scale).postprocess_video(video, output_type="np")


def test_decode_video_matches_pipeline(models, ref64):
    ref, cfg, _, vae = models
    z = _latents(3, seed=2)
    expected = _pipeline_decode(ref, cfg, z, 8)
    calls = []
    got = decode_video(vae, z, on_chunk=lambda d, n: calls.append((d, n)))
    assert got.dtype == np.float32 and got.shape == expected.shape == (1, 9, 32, 32, 3)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert got.min() >= 0.0 and got.max() <= 1.0
    check("decode_video", got, expected, _pipeline_decode(ref64, cfg, z, 8))


def test_decode_compiles_one_program(models):
    """Every latent frame, the first included, runs one program (traced once; the cache shapes once more, never
    compiled), whatever the frame count."""
    _, _, _, vae = models
    counts = vae_mod.TRACE_COUNTS
    before = dict(counts)
    out2 = vae.decode(_latents(2))
    after2 = dict(counts)
    out4 = vae.decode(_latents(4))
    after4 = dict(counts)
    assert out2.shape[2] == 5 and out4.shape[2] == 13
    assert after2.get("decode_unit", 0) - before.get("decode_unit", 0) <= 1  # at most one (0 if already cached)
    assert after2.get("decode_unit", 0) >= 1
    assert after4 == after2, "recompiled for more frames"


def test_scanned_blocks_decode_the_same(models, monkeypatch):
    """VIDAX_VAE_SCAN_BLOCKS: identical ResBlocks as one lax.scan give the same video as the blocks one by one."""
    import jax

    _, _, _, vae = models
    z = _latents(2, seed=5)
    plain = np.asarray(vae.decode(z))
    monkeypatch.setattr(vae_mod, "SCAN_BLOCKS", True)
    jax.clear_caches()  # the flag is read when the program is traced
    scanned = np.asarray(vae.decode(z))
    jax.clear_caches()
    np.testing.assert_allclose(scanned, plain, atol=1e-5, rtol=0)


def test_encode_matches_diffusers(models, ref64):
    ref, _, _, vae = models
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 9, 32, 32)).astype(np.float32)
    expected = run(ref, "encode", x)
    got = np.asarray(vae.encode(x))
    assert got.shape == expected.shape == (1, 4, 3, 4, 4)
    check("encode", got, expected, run(ref64, "encode", x))



def test_encode_posterior_matches_latent_dist(models, ref64):
    ref, _, _, vae = models
    check_posterior("encode posterior", vae, ref, ref64, (1, 3, 9, 32, 32))


# Tiled: a 2-D grid whose strides do not divide the frame (edge tiles of other sizes, blending both ways, blends
# reading already-blended neighbours), and a column of tiles whose stride divides the frame.
DECODE_TILED = {
    "grid_not_dividing": ((5, 7), tiles(32, 32, 24, 24)),  # latent rows 0,3 (4,2), cols 0,3,6 (4,4,1)
    "column_dividing": ((6, 2), tiles(32, 16, 16, 16)),  # latent rows 0,2,4 (4,4,2), one column
}
ENCODE_TILED = {
    "grid_not_dividing": ((40, 56), tiles(32, 32, 24, 24)),  # pixel rows 0,24 (32,16), cols 0,24,48 (32,32,8)
    "row_dividing": ((16, 48), tiles(16, 32, 16, 16)),  # one row, pixel cols 0,16,32 (32,32,16)
}


@pytest.mark.parametrize("case", sorted(DECODE_TILED))
def test_tiled_decode_matches_diffusers(models, ref64, case):
    ref, cfg, _, vae = models
    (h, w), tiles = DECODE_TILED[case]
    plan = decode_plan(cfg, (h, w), tiles)
    assert plan.num_tiles > 1
    assert plan.out_blend == tuple(tiles[f"tile_sample_min_{a}"] - tiles[f"tile_sample_stride_{a}"]
                                   for a in ("height", "width"))
    z = np.random.default_rng(4).standard_normal((1, TINY["z_dim"], 2, h, w)).astype(np.float32)
    expected = run(ref, "decode", z, tiles)
    calls = []
    got = vae.decode(z, tiling=tiles, on_chunk=lambda d, n: calls.append((d, n)))
    assert calls == [(1, 2), (2, 2)]
    check(f"tiled decode {case}", got, expected, run(ref64, "decode", z, tiles))


@pytest.mark.parametrize("case", sorted(ENCODE_TILED))
def test_tiled_encode_matches_diffusers(models, ref64, case):
    ref, cfg, _, vae = models
    (h, w), tiles = ENCODE_TILED[case]
    assert encode_plan(cfg, (h, w), tiles).num_tiles > 1
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 5, h, w)).astype(np.float32)
    expected = run(ref, "encode", x, tiles)
    check(f"tiled encode {case}", vae.encode(x, tiling=tiles), expected, run(ref64, "encode", x, tiles))


def test_tiling_options():
    assert TilingOptions.coerce(None) == TilingOptions() and not TilingOptions().enabled
    on = TilingOptions.coerce(True)
    assert on.enabled and (on.tile_sample_min_height, on.tile_sample_stride_width) == (256, 192)  # diffusers' defaults
    assert TilingOptions.coerce({"tile_sample_min_width": 64}).tile_sample_min_width == 64
    with pytest.raises(ValueError, match="unknown"):
        TilingOptions.coerce({"tile_size": 64})
    cfg = WanVAEConfig()
    assert decode_plan(cfg, (32, 32), True).num_tiles == 1  # a 256 px frame fits one default tile: untiled
    assert decode_plan(cfg, (90, 160), True).num_tiles == 4 * 7  # 720p: rows 0,24,..,72; cols 0,24,..,144
    with pytest.raises(ValueError, match="stride"):
        decode_plan(cfg, (90, 160), tiles(128, 128, 192, 192))


def test_encode_video_inverts_decode_video_layout(models):
    _, cfg, _, vae = models
    frames = np.random.default_rng(6).uniform(0, 1, (1, 5, 32, 32, 3)).astype(np.float32)
    mu = vae.encode(np.moveaxis(frames * 2 - 1, -1, 1))
    got = encode_video(vae, frames, timestep=0.5)  # a parameter Wan's VAE does not take is ignored
    np.testing.assert_array_equal(got, vae_mod.normalize_latents(cfg, mu))
    assert decode_video(vae, got, timestep=0.5).shape == (1, 5, 32, 32, 3)


def test_conversion_reports_problems_and_decode_only(models):
    _, cfg, tensors, _ = models
    broken = dict(tensors)
    del broken["decoder.conv_in.weight"]
    broken["decoder.extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError) as err:
        load_vae(cfg, broken)
    assert err.value.missing == ["decoder/conv_in/kernel"]
    assert err.value.unexpected == ["decoder.extra.weight"]
    dec_only = load_vae(cfg, tensors, with_encoder=False)
    assert dec_only.encoder is None
