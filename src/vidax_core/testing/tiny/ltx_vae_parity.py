"""Shared pieces of the LTX VAE parity tests (``AutoencoderKLLTXVideo`` and ``AutoencoderKLLTX2Video`` alike): a
randomised reference with non-trivial latent statistics, its ``save_pretrained`` folder, and its decode / encode
run in fp32 and in float64 with diffusers' tiling as given."""

from __future__ import annotations

import json
import os

import numpy as np


def random_reference(cls, config: dict, seed: int):
    """``cls(**config)`` (fp32, eval) with every parameter random, the published timestep multiplier (1000, so the
    decode timestep matters) and latent statistics away from 0 / 1 (so a missing (de)normalisation shows)."""
    import torch

    from vidax_core.testing.reference import randomize_

    model = cls(**config).eval().float()
    randomize_(model, seed, 0.1)
    c = model.config.latent_channels
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        if model.decoder.timestep_scale_multiplier is not None:
            model.decoder.timestep_scale_multiplier.fill_(1000.0)
        model.latents_mean.copy_(torch.randn(c, generator=gen) * 0.3)
        model.latents_std.copy_(0.5 + torch.rand(c, generator=gen))
    return model


def saved(model, folder) -> tuple[dict, object]:
    """``model.save_pretrained(folder)`` read back: (its config.json dict, a lazy safetensors reader)."""
    from vidax_core.io.safetensors import SafetensorsFile

    model.save_pretrained(str(folder), safe_serialization=True)
    config = json.loads(open(os.path.join(str(folder), "config.json")).read())
    return config, SafetensorsFile(os.path.join(str(folder), "diffusion_pytorch_model.safetensors"))


def fp32_and_fp64(model, run, tiling: dict | None = None) -> list:
    """``run(model, dtype)`` on the reference in fp32 then in float64, with diffusers' tiling as given (off
    otherwise); the model is fp32 and untiled again afterwards."""
    import torch

    outs = []
    model.disable_tiling()
    if tiling:
        model.enable_tiling(**tiling)
    try:
        for dtype in (torch.float32, torch.float64):
            with torch.no_grad():
                outs.append(run(model.to(dtype), dtype))
    finally:
        model.to(torch.float32).disable_tiling()
    return outs


def decode_ref(model, z: np.ndarray, t, tiling: dict | None = None) -> list:
    """diffusers ``decode(z, temb).sample`` (``t``: per-entry timesteps or None) in fp32 and in float64."""
    import torch

    def run(m, dtype):
        temb = None if t is None else torch.tensor(np.asarray(t, np.float64).reshape(-1), dtype=dtype)
        return m.decode(torch.from_numpy(z).to(dtype), temb).sample.numpy()

    return fp32_and_fp64(model, run, tiling)


def encode_ref(model, x: np.ndarray, tiling: dict | None = None) -> list:
    """diffusers ``encode(x).latent_dist`` (mean, logvar) in fp32 and in float64."""
    import torch

    def run(m, dtype):
        d = m.encode(torch.from_numpy(x).to(dtype)).latent_dist
        return d.mean.numpy(), d.logvar.numpy()

    return fp32_and_fp64(model, run, tiling)


def latents(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check_encode(label: str, model, encode, x: np.ndarray, tiling: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """vidax's ``encode(x, tiling) -> (mean, logvar)`` against the reference's posterior (same shapes, each within
    the fp32 parity bound); returns vidax's (mean, logvar)."""
    from vidax_core.testing.tiny.wan_vae_parity import check

    (m32, lv32), (m64, lv64) = encode_ref(model, x, tiling)
    mean, logvar = encode(x, tiling)
    assert mean.shape == logvar.shape == m64.shape, (mean.shape, logvar.shape, m64.shape)
    check(f"{label} mean", mean, m32, m64)
    check(f"{label} logvar", logvar, lv32, lv64)
    return mean, logvar


def assert_same_params(loaded, want) -> None:
    """Two loaded VAEs hold exactly the same parameters (same paths, bit-equal values) and latent statistics: an
    original single-file layout against its diffusers twin."""
    from vidax_core.nn.state import flat_state

    ours, theirs = flat_state(loaded), flat_state(want)
    assert ours.keys() == theirs.keys(), sorted(set(ours) ^ set(theirs))[:10]
    for path in theirs:
        np.testing.assert_array_equal(np.asarray(ours[path]), np.asarray(theirs[path]), err_msg=str(path))
    assert loaded.cfg.latents_mean == want.cfg.latents_mean and loaded.cfg.latents_std == want.cfg.latents_std
