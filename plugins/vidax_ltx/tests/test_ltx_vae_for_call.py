"""A loaded pipe keeps one LTX VAE across calls with new seeds: ``for_call`` gives the kept VAE a call's own
decode-noise seed (and decode options, noise file), and it then decodes exactly as a VAE built for that call.

Both generations decode with timestep conditioning and fresh decode noise (``decode_noise_scale`` 0.5), so the
seed reaches the frames: the check that the kept VAE and a fresh one agree can fail (a stale seed differs)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from vidax_core import config as config_mod
from vidax_core.io.run_checkpoint import checkpoint_for_run
from vidax_core.model_api import Decoded
from vidax_core.plugins import get_plugins

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs")
SMALL = ["sampling.num_frames=9", "sampling.height=64", "sampling.width=64", "options.decode_timestep=0.05",
         "options.decode_noise_scale=0.5", "options.multiscale=false"]


def _frames(decoded):
    return decoded.frames if isinstance(decoded, Decoded) else np.asarray(decoded)


@pytest.mark.parametrize("demo", ["ltx_demo.yaml", "ltx2_demo.yaml"])
def test_a_kept_vae_decodes_with_the_calls_seed(demo):
    plugins = get_plugins()
    extra = SMALL if demo == "ltx_demo.yaml" else SMALL[:-1]
    cfg = config_mod.resolve(os.path.join(CONFIGS, demo), extra, plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    run_of = lambda seed: dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, seed=seed))  # noqa: E731
    kept = plugins.call("build_vae", spec, ckpt=ckpt, run=run_of(1))
    fresh = plugins.call("build_vae", spec, ckpt=ckpt, run=run_of(2))
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    build = build[0] if isinstance(build, (list, tuple)) else build
    grid = plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=cfg)
    shapes = build.latent_shape(1, tuple(grid))
    rng = np.random.default_rng(0)
    latents = ({k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()} if isinstance(shapes, dict)
               else rng.standard_normal(shapes).astype(np.float32))
    own = _frames(kept.decode_video(latents))
    reused = _frames(kept.for_call(run_of(2)).decode_video(latents))
    want = _frames(fresh.decode_video(latents))
    assert np.abs(own - want).max() > 1e-4  # the seed reaches the frames
    np.testing.assert_array_equal(reused, want)
