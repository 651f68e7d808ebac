"""The example family's own tests: the hooks called the way the core calls them, no installation needed.

Run with ``pytest examples/vidax_example_plugin/tests`` (the plugin module is registered by hand, so the test
works from a source checkout whether or not the distribution is pip-installed).
"""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from vidax_core import config
from vidax_core.io.checkpoint import Checkpoint
from vidax_core.io.convert import ConversionError
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.plugins import Plugins

from vidax_example_plugin import plugin


@pytest.fixture
def plugins():
    p = Plugins()
    p.add(plugin, "example", "vidax-example-plugin", "0.1.0")
    return p


@pytest.fixture
def ckpt(plugins, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the built-in checkpoint is written here
    spec = plugins.registry.get("example-tiny")
    return Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny"))


def run_config(spec, **sampling):
    return config.validate(config.merge(config.defaults_dict(), spec.preset, {"model": {"id": spec.id}},
                                        {"sampling": sampling}))


def test_registered(plugins):
    spec = plugins.registry.get("example-tiny")
    assert spec.family == "example" and spec.tasks == ("t2v",) and spec.plugin == "vidax-example-plugin"


def test_declines_other_families(plugins):
    from vidax_core.registry import ModelSpec

    other = ModelSpec(id="someone-else", family="other")
    assert plugins.call("builtin_checkpoint", other, name="tiny") is None
    assert plugins.call("shard_rules", other) is None


def test_dit_forward_and_logical_axes(plugins, ckpt):
    spec = plugins.registry.get("example-tiny")
    run = run_config(spec)
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=run)
    graphdef, state, flat = abstract_model(build.ctor)
    values = plugins.call("convert_checkpoint", spec, component="transformer", tensors=ckpt.tensors("transformer"),
                          abstract=flat)
    model = materialize(graphdef, state, values)
    sharding = {tuple(p): v.get_metadata().get("out_sharding") for p, v in nnx.to_flat_state(nnx.state(model))}
    assert sharding[("blocks", "qkv", "kernel")] == ("layers", "embed", "heads")

    encoder = plugins.call("build_text_encoder", spec, ckpt=ckpt, run=run)
    context = plugins.call("encode_prompt", spec, encoder=encoder, prompts=["a cat", ""], run=run)
    assert context.shape == (2, run.sampling.max_sequence_length, build.config.text_dim)
    latents = np.random.default_rng(0).standard_normal((2, 4, 2, 8, 8)).astype(np.float32)
    out = model(latents, np.array([999.0, 10.0], np.float32), context)
    assert out.shape == latents.shape and np.isfinite(np.asarray(out)).all()

    vae = plugins.call("build_vae", spec, ckpt=ckpt, run=run)
    assert vae.latent_shape(2, 16, 16) == (2, 8, 8)
    frames = vae.decode_video(np.asarray(out))
    assert frames.shape == (2, 2, 16, 16, 3) and 0.0 <= frames.min() and frames.max() <= 1.0


def test_conversion_reports_every_problem(plugins, ckpt):
    spec = plugins.registry.get("example-tiny")
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=run_config(spec))
    _, _, flat = abstract_model(build.ctor)
    tensors = dict(ckpt.tensors("transformer"))
    del tensors["proj_out.bias"]
    tensors["extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError) as err:
        plugins.call("convert_checkpoint", spec, component="transformer", tensors=tensors, abstract=flat)
    assert err.value.missing == ["proj_out/bias"] and err.value.unexpected == ["extra.weight"]


def test_check_run(plugins):
    spec = plugins.registry.get("example-tiny")
    assert plugins.call("check_run", spec, run=run_config(spec)) == []
    problems = plugins.call("check_run", spec, run=run_config(spec, height=30))
    assert problems == ["sampling.height must be a multiple of 4 for example-tiny, got 30: use 28"]
