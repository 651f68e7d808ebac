"""Parity of the Wan 2.2 VAE (residual, patchified) against diffusers' AutoencoderKLWan on a tiny random model.

Tiling on and off, decode and encode (the reference blends decoder tiles in patch pixels and lays encoder tiles
out on the patch grid). Tolerances come from the reference's own fp32 error: the same diffusers model in float64 is
the truth, and vidax may be at most ``FACTOR`` times as far from it as diffusers in fp32 is.
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
from vidax_core.vae.convert_wan22 import load_vae22  # noqa: E402
from vidax_core.vae.wan21 import WanVAEConfig, decode_plan, decode_video, encode_plan  # noqa: E402
from vidax_core.vae.wan22 import WanVAE22, avg_down, dup_up, patchify, unpatchify  # noqa: E402

# Wan 2.2's shape in miniature: residual blocks, patch 2 (12 pixel channels), a decoder_base_dim of its own,
# block widths that make every AvgDown3D / DupUp3D group size > 1.
TINY = dict(
    base_dim=8,
    decoder_base_dim=12,
    z_dim=4,
    dim_mult=[1, 2, 2, 2],
    num_res_blocks=1,
    attn_scales=[],
    temperal_downsample=[False, True, True],
    dropout=0.0,
    is_residual=True,
    patch_size=2,
    in_channels=12,
    out_channels=12,
    scale_factor_spatial=16,
    latents_mean=[0.1, -0.2, 0.3, 0.0],
    latents_std=[1.5, 0.7, 2.0, 1.1],
)




@pytest.fixture(scope="module")
def models():
    ref = random_wan_vae(TINY)
    cfg = WanVAEConfig.from_config({**dict(ref.config), "_class_name": "AutoencoderKLWan"})
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    return ref, cfg, tensors, load_vae22(cfg, tensors)


@pytest.fixture(scope="module")
def ref64(models):
    return copy.deepcopy(models[0]).double()


def test_reshapes_match_diffusers():
    from diffusers.models.autoencoders import autoencoder_kl_wan as ak

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 5, 8, 12)).astype(np.float32)  # (B, C, T, H, W)
    cl = np.moveaxis(x, 1, -1)
    expected = ak.patchify(torch.from_numpy(x), 2).numpy()
    np.testing.assert_array_equal(np.moveaxis(np.asarray(patchify(cl, 2)), -1, 1), expected)
    np.testing.assert_array_equal(np.asarray(unpatchify(patchify(cl, 2), 2)), cl)
    y = rng.standard_normal((1, 8, 3, 4, 6)).astype(np.float32)
    for ft, fs, cout in ((2, 2, 16), (1, 2, 8), (2, 1, 4)):
        ref = ak.AvgDown3D(8, cout, ft, fs)(torch.from_numpy(y)).numpy()
        got = np.moveaxis(np.asarray(avg_down(np.moveaxis(y, 1, -1), cout, ft, fs)), -1, 1)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
        for first in (True, False):
            ref = ak.DupUp3D(8, cout, ft, fs)(torch.from_numpy(y), first_chunk=first).numpy()
            got = np.moveaxis(np.asarray(dup_up(np.moveaxis(y, 1, -1), cout, ft, fs, first)), -1, 1)
            np.testing.assert_array_equal(got, ref)


def test_config_checks():
    with pytest.raises(ValueError):
        WanVAE22(WanVAEConfig())  # the Wan 2.1 config
    with pytest.raises(NotImplementedError):
        vae_mod.WanVAE(WanVAEConfig.from_config(TINY))


def _latents(frames: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, TINY["z_dim"], frames, 4, 4)).astype(np.float32)


def test_decode_matches_diffusers(models, ref64):
    ref, _, _, vae = models
    z = _latents(3)
    expected = run(ref, "decode", z)
    calls = []
    got = np.asarray(vae.decode(z, on_chunk=lambda d, n: calls.append((d, n))))
    assert got.shape == expected.shape == (1, 3, 9, 64, 64)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    print(f"saturated {np.mean(np.abs(expected) >= 1):.3f}")
    check("wan2.2 decode", got, expected, run(ref64, "decode", z))


def _pipeline_decode(model, cfg, z: np.ndarray) -> np.ndarray:
    """pipeline_wan.py's decode steps (de-normalise, decode, postprocess to [0, 1] channel-last)
    in the model's dtype."""
    from diffusers.video_processor import VideoProcessor

    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        mean = torch.tensor(cfg.latents_mean).view(1, cfg.z_dim, 1, 1, 1).to(dtype)
        inv_std = 1.0 / torch.tensor(cfg.latents_std).view(1, cfg.z_dim, 1, 1, 1).to(dtype)
        video = model.decode(torch.from_numpy(z).to(dtype) / inv_std + mean, return_dict=False)[0]
        return VideoProcessor(vae_scale_factor=16).postprocess_video(video, output_type="np")


def test_decode_video_and_compile_count(models, ref64):
    ref, cfg, _, vae = models
    z = _latents(4, seed=2)
    expected = _pipeline_decode(ref, cfg, z)
    before = dict(vae_mod.TRACE_COUNTS)
    got = decode_video(vae, z)
    after = dict(vae_mod.TRACE_COUNTS)
    assert got.shape == expected.shape == (1, 13, 64, 64, 3)
    check("wan2.2 decode_video", got, expected, _pipeline_decode(ref64, cfg, z))
    assert after.get("decode_unit", 0) - before.get("decode_unit", 0) <= 1  # 4 latent frames: one program


def test_encode_matches_diffusers(models, ref64):
    ref, _, _, vae = models
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 9, 64, 64)).astype(np.float32)
    expected = run(ref, "encode", x)
    got = np.asarray(vae.encode(x))
    assert got.shape == expected.shape == (1, 4, 3, 4, 4)
    check("wan2.2 encode", got, expected, run(ref64, "encode", x))



def test_encode_posterior_matches_latent_dist(models, ref64):
    ref, _, _, vae = models
    check_posterior("wan2.2 encode posterior", vae, ref, ref64, (1, 3, 9, 64, 64))


# Tiled: a 2-D grid whose strides do not divide the frame (edge tiles of other sizes, blending both ways, blends
# reading already-blended neighbours), and a single column / row of tiles whose stride divides the frame.
DECODE_TILED = {
    "grid_not_dividing": ((5, 4), tiles(64, 64, 48, 48)),  # latent rows 0,3 (4,2), cols 0,3 (4,1); blend 8 patch px
    "column_dividing": ((6, 2), tiles(64, 32, 32, 32)),  # latent rows 0,2,4 (4,4,2), one column; blend 16
}
ENCODE_TILED = {  # (pixel height, width); tiles are laid out on the 2x2 patch grid, as the reference does
    "grid_not_dividing": ((80, 112), tiles(32, 32, 24, 24)),  # patch rows 0,24 (32,16), cols 0,24,48 (32,32,8)
    "row_dividing": ((32, 96), tiles(16, 32, 16, 16)),  # one row, patch cols 0,16,32 (32,32,16)
}


@pytest.mark.parametrize("case", sorted(DECODE_TILED))
def test_tiled_decode_matches_diffusers(models, ref64, case):
    ref, cfg, _, vae = models
    (h, w), tiles = DECODE_TILED[case]
    plan = decode_plan(cfg, (h, w), tiles)
    assert plan.num_tiles > 1 and plan.out_size == (8 * h, 8 * w)  # decoder output: 16 px / patch 2
    z = np.random.default_rng(4).standard_normal((1, TINY["z_dim"], 2, h, w)).astype(np.float32)
    expected = run(ref, "decode", z, tiles)
    calls = []
    got = vae.decode(z, tiling=tiles, on_chunk=lambda d, n: calls.append((d, n)))
    assert calls == [(1, 2), (2, 2)]
    check(f"wan2.2 tiled decode {case}", got, expected, run(ref64, "decode", z, tiles))


@pytest.mark.parametrize("case", sorted(ENCODE_TILED))
def test_tiled_encode_matches_diffusers(models, ref64, case):
    ref, cfg, _, vae = models
    (h, w), tiles = ENCODE_TILED[case]
    assert encode_plan(cfg, (h, w), tiles).num_tiles > 1
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 5, h, w)).astype(np.float32)
    expected = run(ref, "encode", x, tiles)
    check(f"wan2.2 tiled encode {case}", vae.encode(x, tiling=tiles), expected, run(ref64, "encode", x, tiles))


def test_conversion_reports_problems_and_decode_only(models):
    _, cfg, tensors, _ = models
    broken = dict(tensors)
    del broken["decoder.up_blocks.0.upsampler.time_conv.weight"]
    broken["decoder.up_blocks.0.upsamplers.0.time_conv.weight"] = np.zeros(3, np.float32)  # a Wan 2.1 key
    with pytest.raises(ConversionError) as err:
        load_vae22(cfg, broken)
    assert err.value.missing == ["decoder/up_blocks/0/upsampler/time_conv/kernel"]
    assert err.value.unexpected == ["decoder.up_blocks.0.upsamplers.0.time_conv.weight"]
    assert load_vae22(cfg, tensors, with_encoder=False).encoder is None
