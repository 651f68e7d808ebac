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


#: A ragged 2 x 2 tile grid: tiles of 128 px (4 latents) every 96 px (3 latents). A 5 x 5 latent (160 x 160 pixels)
#: has a bottom row and right column of 2 latents / 64 pixels: four tile shapes, padded to one.
RAGGED = dict(tile_sample_min_height=128, tile_sample_min_width=128, tile_sample_stride_height=96,
              tile_sample_stride_width=96)
RAGGED_LATENT = (5, 5)
#: Padded vs per-shape tiles, both vidax fp32: the same arithmetic on the real area, in other XLA programs (a few
#: dozen fp32 ulps of the output's largest value).
PAD_NOISE = 4e-6


def ragged_runs(lib, vae, z: np.ndarray, x: np.ndarray, timestep=None) -> dict:
    """Decode ``z`` and encode ``x`` over the :data:`RAGGED` grid, each two ways, with the XLA compiles each took:
    ``"decode"`` / ``"encode"`` as ``lib`` (:mod:`vidax_ltx.vae`, LTX-2's too) does them (edge tiles
    padded, one program) and ``"*_per_shape"``, ``run_tiled`` without ``pad_tiles`` (one program per tile shape);
    each ``(output, compiles)``, the encode's output the stacked (mean, logvar)."""
    import pytest

    from vidax_core.testing.counters import Counters
    from vidax_core.vae.chunks import chunk_runner, gaussian_posterior
    from vidax_core.vae.tiling import run_tiled

    zz, xx = np.moveaxis(z, 1, -1), np.moveaxis(x, 1, -1)
    t = None if timestep is None else np.float32(timestep)
    extra = lambda n: (None if t is None else np.full((n,), t, np.float32),)  # noqa: E731  (decode's timestep)

    def per_shape(program, data, plan, more=None):
        return run_tiled(data, chunk_runner(vae, program, streams=False, extra=more), plan=plan,
                         bounds=[(0, data.shape[1])])

    def counted(fn):
        with pytest.MonkeyPatch.context() as mp:
            c = Counters(mp)
            out = fn()
            return out, c.compiles

    dplan = lib.decode_plan(vae.cfg, zz.shape[2:4], RAGGED)
    eplan = lib.encode_plan(vae.cfg, xx.shape[2:4], RAGGED)
    assert (dplan.rows, dplan.cols, dplan.tile) == ([0, 3], [0, 3], (4, 4)), dplan
    assert (eplan.rows, eplan.cols, eplan.tile) == ([0, 96], [0, 96], (128, 128)), eplan
    c = vae.cfg.latent_channels
    for program in (lib._decode_jit, lib._encode_jit):  # counts independent of what earlier tests compiled
        program.clear_cache()
    return {
        "decode": counted(lambda: lib.decode(vae, z, timestep=timestep, tiling=RAGGED)),
        "decode_per_shape": counted(lambda: np.moveaxis(per_shape(lib._decode_jit, zz, dplan, extra), -1, 1)),
        "encode": counted(lambda: np.stack(lib.encode(vae, x, tiling=RAGGED))),
        "encode_per_shape": counted(
            lambda: np.stack(gaussian_posterior(per_shape(lib._encode_jit, xx, eplan), c))),
    }


def check_ragged(label: str, runs: dict) -> None:
    """The padded edge tiles of :func:`ragged_runs` give what the per-shape tiles give (within :data:`PAD_NOISE`
    of the largest output value), in one compile per direction against four."""
    for fn in ("decode", "encode"):
        (got, _), (alone, _) = runs[fn], runs[fn + "_per_shape"]
        assert got.shape == alone.shape, (fn, got.shape, alone.shape)
        diff, top = float(np.abs(got - alone).max()), float(np.abs(alone).max())
        print(f"{label} ragged tiled {fn}, padded vs per-shape tiles: max abs {diff:.2e} (|out| max {top:.2f})")
        assert diff <= PAD_NOISE * max(top, 1.0), (label, fn, diff, top)
    counts = {k: v[1] for k, v in runs.items()}
    print(f"{label} compiles: {counts}")
    assert counts["decode"] == counts["encode"] == 1, counts
    assert counts["decode_per_shape"] == counts["encode_per_shape"] == 4, counts
