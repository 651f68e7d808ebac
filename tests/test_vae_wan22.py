"""Parity of the Wan 2.2 VAE (residual, patchified) against diffusers' AutoencoderKLWan on a tiny random model."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.vae import wan21 as vae_mod  # noqa: E402
from vidax_core.vae.convert_wan22 import load_vae22  # noqa: E402
from vidax_core.vae.wan21 import WanVAEConfig, decode_video  # noqa: E402
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


def _errors(ours, ref) -> tuple[float, float]:
    diff = np.asarray(ours, np.float64) - np.asarray(ref, np.float64)
    return float(np.abs(diff).max()), float(np.linalg.norm(diff) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def models():
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    ref = AutoencoderKLWan(**TINY).eval()
    with torch.no_grad():  # every parameter random, activations kept O(1)
        for name, p in ref.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p[0].numel() ** 0.5)
    cfg = WanVAEConfig.from_config({**dict(ref.config), "_class_name": "AutoencoderKLWan"})
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    return ref, cfg, tensors, load_vae22(cfg, tensors)


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


def test_decode_matches_diffusers(models):
    ref, _, _, vae = models
    z = _latents(3)
    with torch.no_grad():
        expected = ref.decode(torch.from_numpy(z)).sample.numpy()
    calls = []
    got = np.asarray(vae.decode(z, on_chunk=lambda d, n: calls.append((d, n))))
    assert got.shape == expected.shape == (1, 3, 9, 64, 64)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    max_abs, rel = _errors(got, expected)
    print(f"wan2.2 decode: max abs {max_abs:.3e}, rel {rel:.3e}, saturated {np.mean(np.abs(expected) >= 1):.3f}")
    assert max_abs <= 1e-4 and rel <= 1e-5


def test_decode_video_and_compile_count(models):
    from diffusers.video_processor import VideoProcessor

    ref, cfg, _, vae = models
    z = _latents(4, seed=2)
    with torch.no_grad():  # pipeline_wan.py's decode steps
        mean = torch.tensor(cfg.latents_mean).view(1, cfg.z_dim, 1, 1, 1)
        inv_std = 1.0 / torch.tensor(cfg.latents_std).view(1, cfg.z_dim, 1, 1, 1)
        video = ref.decode(torch.from_numpy(z) / inv_std + mean, return_dict=False)[0]
        expected = VideoProcessor(vae_scale_factor=16).postprocess_video(video, output_type="np")
    before = dict(vae_mod.TRACE_COUNTS)
    got = decode_video(vae, z)
    after = dict(vae_mod.TRACE_COUNTS)
    assert got.shape == expected.shape == (1, 13, 64, 64, 3)
    max_abs, rel = _errors(got, expected)
    print(f"wan2.2 decode_video: max abs {max_abs:.3e}, rel {rel:.3e}")
    assert max_abs <= 1e-4 and rel <= 1e-5
    for key in ("decode_first", "decode_chunk"):  # 4 latent frames: at most one program per chunk kind
        assert after.get(key, 0) - before.get(key, 0) <= 1


def test_encode_matches_diffusers(models):
    ref, _, _, vae = models
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 9, 64, 64)).astype(np.float32)
    with torch.no_grad():
        expected = ref.encode(torch.from_numpy(x)).latent_dist.mean.numpy()
    got = np.asarray(vae.encode(x))
    assert got.shape == expected.shape == (1, 4, 3, 4, 4)
    max_abs, rel = _errors(got, expected)
    print(f"wan2.2 encode: max abs {max_abs:.3e}, rel {rel:.3e}")
    assert max_abs <= 1e-4 and rel <= 1e-5


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
