"""Parity of the Wan 2.1 VAE against diffusers' AutoencoderKLWan on a tiny random model (torch is the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.vae import wan21 as vae_mod  # noqa: E402
from vidax_core.vae.convert_wan21 import load_vae  # noqa: E402
from vidax_core.vae.wan21 import WanVAEConfig, decode_video  # noqa: E402

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


def _errors(ours: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
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
    cfg = WanVAEConfig.from_config({**dict(ref.config), "_class_name": "AutoencoderKLWan", "unknown": 1})
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    return ref, cfg, tensors, load_vae(cfg, tensors)


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


def test_decode_matches_diffusers(models):
    ref, _, _, vae = models
    z = _latents(3)
    with torch.no_grad():
        expected = ref.decode(torch.from_numpy(z)).sample.numpy()
    calls = []
    got = np.asarray(vae.decode(z, on_chunk=lambda d, n: calls.append((d, n))))
    assert got.shape == expected.shape == (1, 3, 9, 32, 32)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    max_abs, rel = _errors(got, expected)
    print(f"decode: max abs {max_abs:.3e}, rel {rel:.3e}, saturated {np.mean(np.abs(expected) >= 1):.3f}")
    assert max_abs <= 1e-4 and rel <= 1e-5


def test_decode_video_matches_pipeline(models):
    from diffusers.video_processor import VideoProcessor

    ref, cfg, _, vae = models
    z = _latents(3, seed=2)
    with torch.no_grad():  # pipeline_wan.py's decode steps
        latents = torch.from_numpy(z)
        mean = torch.tensor(cfg.latents_mean).view(1, cfg.z_dim, 1, 1, 1)
        inv_std = 1.0 / torch.tensor(cfg.latents_std).view(1, cfg.z_dim, 1, 1, 1)
        video = ref.decode(latents / inv_std + mean, return_dict=False)[0]
        expected = VideoProcessor(vae_scale_factor=8).postprocess_video(video, output_type="np")
    calls = []
    got = decode_video(vae, z, on_chunk=lambda d, n: calls.append((d, n)))
    assert got.dtype == np.float32 and got.shape == expected.shape == (1, 9, 32, 32, 3)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert got.min() >= 0.0 and got.max() <= 1.0
    max_abs, rel = _errors(got, expected)
    print(f"decode_video: max abs {max_abs:.3e}, rel {rel:.3e}")
    assert max_abs <= 1e-4 and rel <= 1e-5


def test_decode_compiles_once_per_chunk_kind(models):
    _, _, _, vae = models
    counts = vae_mod.TRACE_COUNTS
    before = dict(counts)
    out2 = vae.decode(_latents(2))
    after2 = dict(counts)
    out4 = vae.decode(_latents(4))
    after4 = dict(counts)
    assert out2.shape[2] == 5 and out4.shape[2] == 13
    for key in ("decode_first", "decode_chunk"):
        assert after2.get(key, 0) - before.get(key, 0) <= 1  # at most one compile each (0 if already cached)
        assert after2.get(key, 0) >= 1
        assert after4.get(key, 0) == after2.get(key, 0), f"{key} recompiled for more frames"


def test_encode_matches_diffusers(models):
    ref, _, _, vae = models
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 9, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = ref.encode(torch.from_numpy(x)).latent_dist.mean.numpy()
    got = np.asarray(vae.encode(x))
    assert got.shape == expected.shape == (1, 4, 3, 4, 4)
    max_abs, rel = _errors(got, expected)
    print(f"encode: max abs {max_abs:.3e}, rel {rel:.3e}")
    assert max_abs <= 1e-4 and rel <= 1e-5


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
