"""Shared pieces of the VAE parity tests: a randomised diffusers AutoencoderKLWan, its decode/encode with tiling as
given, and the check "vidax within FACTOR x the reference's own fp32 error, both against the float64 reference"."""

from __future__ import annotations

import numpy as np
import torch

FACTOR = 4.0


def errors(ours, ref) -> tuple[float, float]:
    diff = np.asarray(ours, np.float64) - np.asarray(ref, np.float64)
    return float(np.abs(diff).max()), float(np.linalg.norm(diff) / np.linalg.norm(ref))


def check(label: str, got, ref32, ref64) -> None:
    """vidax within FACTOR x the reference's own fp32 error (both measured against the float64 reference)."""
    got, ref32, ref64 = (np.asarray(a, np.float64) for a in (got, ref32, ref64))
    assert got.shape == ref64.shape, (got.shape, ref64.shape)
    ours, _ = errors(got, ref64)
    floor, _ = errors(ref32, ref64)
    print(f"{label}: max abs vs fp64 {ours:.3e} (diffusers fp32: {floor:.3e}), vs diffusers fp32 "
          f"{errors(got, ref32)[0]:.3e}, rel {errors(got, ref32)[1]:.3e}")
    assert 0 < floor < 1e-3  # the fp64 run really ran in fp64, on a model with O(1) outputs
    assert ours <= FACTOR * floor


def run(model, fn: str, x: np.ndarray, tiling: dict | None = None) -> np.ndarray:
    """diffusers ``decode`` / ``encode`` (latent mean) with tiling as given; float64 when the model is."""
    model.disable_tiling()
    if tiling:
        model.enable_tiling(**tiling)
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        t = torch.from_numpy(x).to(dtype)
        out = model.decode(t).sample if fn == "decode" else model.encode(t).latent_dist.mean
    model.disable_tiling()
    return out.numpy()


def tiles(th: int, tw: int, sh: int, sw: int) -> dict:
    return dict(tile_sample_min_height=th, tile_sample_min_width=tw, tile_sample_stride_height=sh,
                tile_sample_stride_width=sw)


def random_wan_vae(config: dict):
    """diffusers AutoencoderKLWan(**config) with every parameter random and activations kept O(1)."""
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
