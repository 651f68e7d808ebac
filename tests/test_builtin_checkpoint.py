"""vidax_core.io.builtin: the generated built-in checkpoint a plugin's ``builtin_checkpoint`` hook returns.

Checked against exact expectations: the cache path, the weight statistics rule, the diffusers layout the core's
own Checkpoint reader then loads, determinism, the generate-then-rename behaviour (no partial folder after a
failing writer, a finished folder is reused, a stale one is replaced, a lost race uses the winner's copy).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from vidax_core.io import builtin
from vidax_core.io.checkpoint import Checkpoint

COMPONENTS = {
    "transformer": ({"_class_name": "ToyDiT", "width": 8}, {"proj.weight": (8, 4), "proj.bias": (8,)}),
    "text_encoder": ({"_class_name": "ToyText"}, {"embed.weight": (10, 4)}),
}
SCHEDULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0}


def test_cache_folder_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert builtin.cache_folder("vidax-toy", "1.2.0", "tiny") == os.path.join(
        tmp_path, "vidax", "vidax-toy", "1.2.0", "tiny")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert builtin.cache_folder("d", "v", "n") == os.path.join(tmp_path, "home", ".cache", "vidax", "d", "v", "n")


def test_random_weights_scales_and_determinism():
    shapes = {"w": (64, 16, 2, 2), "b": (4096,), "lin": (300, 400)}
    w = builtin.random_weights(shapes, 0)
    assert {k: v.shape for k, v in w.items()} == shapes and all(v.dtype == np.float32 for v in w.values())
    assert abs(w["w"].std() - 1 / np.sqrt(16 * 2 * 2)) < 0.01  # fan_in = 64 values per output row
    assert abs(w["lin"].std() - 1 / np.sqrt(400)) < 0.002
    assert abs(w["b"].std() - 0.02) < 0.002 and np.all(w["b"] != 0)  # biases are non-zero
    again = builtin.random_weights(dict(reversed(list(shapes.items()))), np.random.default_rng(0))
    assert all(np.array_equal(w[k], again[k]) for k in shapes)  # drawn in key order, not dict order
    assert not np.array_equal(builtin.random_weights(shapes, 1)["b"], w["b"])


def test_write_diffusers_layout_loads_with_the_core_reader(tmp_path):
    folder = str(tmp_path / "ckpt")
    builtin.write_diffusers(folder, COMPONENTS, pipeline="ToyPipeline", library="vidax_toy",
                            scheduler=SCHEDULER, seed=3)
    with open(os.path.join(folder, "model_index.json")) as f:
        assert json.load(f) == {"_class_name": "ToyPipeline", "transformer": ["vidax_toy", "ToyDiT"],
                                "text_encoder": ["vidax_toy", "ToyText"],
                                "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]}
    assert os.path.isfile(os.path.join(folder, "transformer", "diffusion_pytorch_model.safetensors"))
    assert os.path.isfile(os.path.join(folder, "text_encoder", "model.safetensors"))
    ckpt = Checkpoint(folder)
    assert ckpt.config("transformer")["width"] == 8 and ckpt.config("scheduler")["shift"] == 1.0
    tensors = {k: np.asarray(v) for k, v in ckpt.tensors("transformer").items()}
    # one generator, components in order, keys sorted within each: the same draws as random_weights
    rng = np.random.default_rng(3)
    want = builtin.random_weights(COMPONENTS["transformer"][1], rng)
    assert sorted(tensors) == ["proj.bias", "proj.weight"]
    assert all(np.array_equal(tensors[k], want[k]) for k in want)
    text = builtin.random_weights(COMPONENTS["text_encoder"][1], rng)
    assert np.array_equal(np.asarray(ckpt.tensors("text_encoder")["embed.weight"]), text["embed.weight"])


def test_write_diffusers_needs_class_names(tmp_path):
    with pytest.raises(ValueError, match="_class_name"):
        builtin.write_diffusers(str(tmp_path / "c"), {"vae": ({}, {"w": (2, 2)})}, pipeline="P", library="l")


def test_generated_checkpoint_written_once(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def write(folder):
        calls.append(folder)
        builtin.write_diffusers(folder, COMPONENTS, pipeline="P", library="l", scheduler=SCHEDULER)

    first = builtin.generated_checkpoint("vidax-toy", "0.1.0", "tiny", write)
    assert first == builtin.cache_folder("vidax-toy", "0.1.0", "tiny")
    assert os.path.isfile(os.path.join(first, "model_index.json"))
    assert calls and calls[0] != first  # written elsewhere, then renamed into place
    assert builtin.generated_checkpoint("vidax-toy", "0.1.0", "tiny", write) == first and len(calls) == 1
    assert os.listdir(os.path.dirname(first)) == ["tiny"]  # no temporary folder left behind


def test_generated_checkpoint_failure_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(folder):
        os.makedirs(os.path.join(folder, "transformer"))
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        builtin.generated_checkpoint("vidax-toy", "0.1.0", "tiny", broken)
    assert os.listdir(os.path.dirname(builtin.cache_folder("vidax-toy", "0.1.0", "tiny"))) == []

    with pytest.raises(RuntimeError, match="model_index.json"):
        builtin.generated_checkpoint("vidax-toy", "0.1.0", "tiny", lambda folder: os.makedirs(folder))
    assert not os.path.exists(builtin.cache_folder("vidax-toy", "0.1.0", "tiny"))


def test_generated_checkpoint_replaces_a_stale_folder_and_loses_races_gracefully(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target = builtin.cache_folder("vidax-toy", "0.1.0", "tiny")
    os.makedirs(os.path.join(target, "transformer"))  # an interrupted old writer: no model_index.json
    builtin.generated_checkpoint("vidax-toy", "0.1.0", "tiny",
                                 lambda f: builtin.write_diffusers(f, COMPONENTS, pipeline="P", library="l"))
    assert sorted(os.listdir(target)) == ["model_index.json", "text_encoder", "transformer"]

    other = builtin.cache_folder("vidax-toy", "0.1.0", "race")

    def racing(folder):  # another process finishes while this one is still writing
        builtin.write_diffusers(other, COMPONENTS, pipeline="Winner", library="l")
        builtin.write_diffusers(folder, COMPONENTS, pipeline="Loser", library="l")

    assert builtin.generated_checkpoint("vidax-toy", "0.1.0", "race", racing) == other
    with open(os.path.join(other, "model_index.json")) as f:
        assert json.load(f)["_class_name"] == "Winner"
    assert sorted(os.listdir(os.path.dirname(other))) == ["race", "tiny"]
