"""The hooks called the way the core calls them: registration, the denoiser's forward pass and logical axes, the
conversion error report, and the one-line messages of check_run and check_checkpoint (they are user interface)."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx
from vidax_example_plugin import plugin
from vidax_example_plugin.tiny import write_tiny

from vidax_core import Checkpoint, ConversionError, Plugins, abstract_model, materialize
from vidax_core.testing import resolve


@pytest.fixture
def plugins():
    p = Plugins()
    plugin.register(p)
    return p


@pytest.fixture
def ckpt(plugins, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the built-in checkpoint is written here
    spec = plugins.registry.get("example-tiny")
    return Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny"))


def run_config(plugins, *overrides):
    return resolve(plugins, ["model.id=example-tiny", *overrides])


def test_registered(plugins):
    spec = plugins.registry.get("example-tiny")
    assert (spec.family, spec.tasks, spec.plugin) == ("example", ("t2v",), "vidax-example-plugin")
    assert run_config(plugins).options["guidance_rescale"] == 0.0


def test_dit_forward_and_logical_axes(plugins, ckpt):
    spec, run = plugins.registry.get("example-tiny"), run_config(plugins)
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=run)
    graphdef, state, flat = abstract_model(build.ctor)
    values = plugins.call("convert_checkpoint", spec, component="transformer", tensors=ckpt.tensors("transformer"),
                          abstract=flat, config=ckpt.config("transformer"))
    model = materialize(graphdef, state, values)
    axes = {tuple(p): v.get_metadata().get("out_sharding") for p, v in nnx.to_flat_state(nnx.state(model))}
    assert axes[("blocks", "to_q", "kernel")] == ("layers", "embed", "heads")
    assert axes[("blocks", "to_out", "kernel")] == ("layers", "heads", "embed")

    encoder = plugins.call("build_text_encoder", spec, ckpt=ckpt, run=run, mesh=None)
    context = plugins.call("encode_prompt", spec, encoder=encoder, prompts=["a cat", ""], run=run)
    assert context.shape == (2, run.sampling.max_sequence_length, build.config.text_dim)
    latents = np.random.default_rng(0).standard_normal((2, 4, 2, 8, 8)).astype(np.float32)
    out = model(latents, np.array([999.0, 10.0], np.float32), context)
    assert out.shape == latents.shape and np.isfinite(np.asarray(out)).all()

    vae = plugins.call("build_vae", spec, ckpt=ckpt, run=run)
    assert vae.latent_shape(2, 16, 16) == (2, 8, 8)
    assert plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=run) == vae.latent_shape(8, 64, 64)
    frames = vae.decode_video(np.asarray(out))
    assert frames.shape == (2, 2, 16, 16, 3) and 0.0 <= frames.min() and frames.max() <= 1.0


def test_conversion_reports_every_problem(plugins, ckpt):
    spec = plugins.registry.get("example-tiny")
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=run_config(plugins))
    _, _, flat = abstract_model(build.ctor)
    tensors = dict(ckpt.tensors("transformer"))
    del tensors["proj_out.bias"]
    tensors["extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError) as err:
        plugins.call("convert_checkpoint", spec, component="transformer", tensors=tensors, abstract=flat,
                     config=ckpt.config("transformer"))
    assert err.value.missing == ["proj_out/bias"] and err.value.unexpected == ["extra.weight"]


def test_check_run(plugins):
    spec = plugins.registry.get("example-tiny")
    assert plugins.call("check_run", spec, run=run_config(plugins)) == []
    problems = plugins.call("check_run", spec, run=run_config(plugins, "sampling.height=30"))
    assert problems == ["sampling.height must be a multiple of 4 for example-tiny, got 30: use 28"]


def test_check_checkpoint(plugins, tmp_path):
    spec = plugins.registry.get("example-tiny")
    write_tiny(str(tmp_path / "bad"), in_channels=8)
    problems = plugins.call("check_checkpoint", spec, ckpt=Checkpoint(str(tmp_path / "bad")), run=run_config(plugins))
    assert problems == ["transformer/config.json: in_channels=8 differs from latent_channels=4 of vae/config.json: "
                        "the two components do not belong together"]
