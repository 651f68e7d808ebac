"""Shared pieces of the VAE parity tests: a randomised diffusers AutoencoderKLWan, its decode/encode with tiling as
given, and the kit's fp32 parity check (vidax within FACTOR x the fp32 errors, against the float64 reference)."""

from __future__ import annotations

import numpy as np

from vidax_core.testing.parity import FP32_FACTOR as FACTOR, assert_fp32_parity


def errors(ours, ref) -> tuple[float, float]:
    diff = np.asarray(ours, np.float64) - np.asarray(ref, np.float64)
    return float(np.abs(diff).max()), float(np.linalg.norm(diff) / np.linalg.norm(ref))


def check(label: str, got, ref32, ref64, vidax_err: float = 0.0) -> None:
    """:func:`vidax_core.testing.parity.assert_fp32_parity` (``vidax_err``: vidax's own fp32 error where the test
    measured it with ``parity.fp32_error``), on a model with O(1) outputs (the reference's fp32 error below 1e-3)."""
    assert errors(ref32, ref64)[0] < 1e-3
    assert_fp32_parity(label, got, ref32, ref64, vidax_err=vidax_err, factor=FACTOR)


def run(model, fn: str, x: np.ndarray, tiling: dict | None = None) -> np.ndarray:
    """diffusers ``decode`` / ``encode`` (latent mean) / ``posterior`` (mean and clamped log-variance stacked on the
    channel axis) with tiling as given; float64 when the model is."""
    import torch

    model.disable_tiling()
    if tiling:
        model.enable_tiling(**tiling)
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        t = torch.from_numpy(x).to(dtype)
        if fn == "decode":
            out = model.decode(t).sample
        else:
            dist = model.encode(t).latent_dist
            out = torch.cat([dist.mean, dist.logvar], 1) if fn == "posterior" else dist.mean
    model.disable_tiling()
    return out.numpy()



def check_posterior(label: str, vae, ref, ref64, shape: tuple[int, ...]) -> None:
    """:func:`vidax_core.vae.wan21.encode_posterior` (frames in [0, 1], channel-last) against diffusers'
    ``latent_dist`` mean and clamped logvar on uniform pixels of ``shape`` (B, 3, T, H, W)."""
    from vidax_core.vae.wan21 import encode_posterior

    x = np.random.default_rng(4).uniform(-1, 1, shape).astype(np.float32)
    got = np.concatenate(encode_posterior(vae, np.moveaxis((x + 1) / 2, 1, -1)), 1)
    expected = run(ref, "posterior", x)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    check(label, got, expected, run(ref64, "posterior", x))

def tiles(th: int, tw: int, sh: int, sw: int) -> dict:
    return dict(tile_sample_min_height=th, tile_sample_min_width=tw, tile_sample_stride_height=sh,
                tile_sample_stride_width=sw)


def random_wan_vae(config: dict):
    """diffusers AutoencoderKLWan(**config) with every parameter random and activations kept O(1)."""
    import torch
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    ref = AutoencoderKLWan(**config).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p[0].numel() ** 0.5)
    return ref
