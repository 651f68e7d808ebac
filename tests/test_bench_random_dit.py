"""``vidax bench --random-dit`` times one random-weight DiT call of every family's architecture, structured text
contexts included (LTX-Video's hidden + mask, HunyuanVideo's hidden + mask + pooled and guidance input,
Kandinsky 5's channel-last latents, hidden + pooled and RoPE-scale input, Cosmos3's token ids, LTX-2's video +
audio streams with their positions), resident and streamed from pinned host memory, with FLOPs from the family's
count; and every registered id's default config builds its call at its reference size from the id's published
layout alone."""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import jax
import numpy as np
import pytest

from repo_models import repo_specs
from vidax_core.bench import random_dit
from vidax_core.plugins import get_plugins

ROOT = os.path.join(os.path.dirname(__file__), "..")
CONFIGS = os.path.join(ROOT, "configs")
DEMOS = {"wan": "demo.yaml", "cosmos": "cosmos_demo.yaml", "cosmos3": "cosmos3_demo.yaml",
         "cogvideox": "cogvideox_demo.yaml", "ltx": "ltx_demo.yaml", "ltx2": "ltx2_demo.yaml",
         "hunyuan": "hunyuan_demo.yaml", "hunyuan15": "hunyuan15_demo.yaml", "kandinsky": "kandinsky_demo.yaml",
         "skyreels": "skyreels_demo.yaml", "helios": "helios_demo.yaml", "sana-video": "sana_video_demo.yaml"}
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.max_sequence_length=16"]

# one block group (LTX-Video: multi-scale), two groups (double- then single-stream) streamed in turn, and two
# latent streams (LTX-2: video + audio tokens through one block stack)
STREAMED = ("ltx", "hunyuan", "ltx2")


def _args(config, overrides=(), **kw):
    base = dict(config=config, overrides=list(overrides), batch=2, random_blocks=2, attention="xla", repeats=1,
                offload=None, published=False)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("family", list(DEMOS))
def test_every_family_runs_resident_and_streamed(family):
    args = _args(os.path.join(CONFIGS, DEMOS[family]), SMALL, offload="1" if family in STREAMED else None)
    rep = random_dit.bench(args)
    (row,) = rep["rows"]
    assert "error" not in row, row.get("error")
    assert row["call_s"] > 0 and row["attention_calls"]
    assert rep["flops_per_call"] > 0
    if family not in STREAMED:
        return
    streamed = row["offload"][0]
    assert streamed["host_memory"] == "pinned_host" and streamed["chunks"] == 2 * len(rep["blocks"])
    assert 0.0 <= streamed["hidden_fraction"] <= 1.0 and streamed["h2d_s_per_chunk"] > 0


MODEL_IDS = sorted(spec.id for spec in repo_specs())  # the repository's ids: each ships a config and a layout


@pytest.fixture(scope="module")
def traced():
    """Every registered id's random-DiT call (one block) at its default config's size, from its published layout:
    (setup, traced output shapes)."""
    plugins = get_plugins()
    out = {}
    for model_id in MODEL_IDS:
        args = _args(os.path.join(ROOT, plugins.registry.get(model_id).default_config), random_blocks=1,
                     published=True)
        st = random_dit.setup(args, plugins)
        out[model_id] = (st, random_dit.trace(args, plugins, st))
    return out


TRACED = pytest.mark.xdist_group("random_dit_trace")  # one worker builds the traced fixture (20 s), not both


@TRACED
@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_every_model_id_traces_at_its_reference_size(traced, model_id):
    """The denoiser's output has the latents' layout (the same shape but for the channel axis: image-to-video
    inputs carry their condition channels), float32, for every id's published architecture and default size."""
    st, out = traced[model_id]
    x = st.inputs[0] if st.inputs[0] is not None else (tuple(st.build.latent_shape(st.batch, st.grid)), "float32")
    x = random_dit._map_pairs(lambda sd: jax.ShapeDtypeStruct(sd[0], np.dtype(sd[1])), x)
    assert jax.tree.structure(out) == jax.tree.structure(x)
    for o, i in zip(jax.tree.leaves(out), jax.tree.leaves(x)):
        assert o.dtype == np.float32 and len(o.shape) == len(i.shape) and o.shape[0] == st.batch
        assert sum(a != b for a, b in zip(o.shape, i.shape)) <= 1, (o.shape, i.shape)
    assert all(n == 1 for n in st.kept.values())


@TRACED
def test_reference_sizes_and_inputs_of_the_families_that_needed_them(traced):
    """Cosmos3 takes token ids, LTX-2 both streams with positions, the I2V denoisers their condition channels (and
    Wan2.1's the CLIP tokens), LTX-Video's multi-scale config its second, upscaled pass."""
    st, _ = traced["cosmos3-nano"]
    assert st.inputs[1] == ((2, st.text), "int32") and st.inputs[2]["noisy_frames"].shape == (2, st.grid[0])
    st, out = traced["ltx-2.5-22b-dev"]
    assert set(out) == {"video", "audio"} and st.inputs[2]["video_positions"].shape == (2, int(np.prod(st.grid)), 3)
    st, _ = traced["wan2.1-i2v-14b-480p"]
    assert st.inputs[0][0][1] == 36 and st.inputs[2]["image_context"][0] == (2, 257, 1280)
    st, _ = traced["cogvideox1.5-5b-i2v"]
    assert st.inputs[0][0][2] == 32 and "ofs" in st.inputs[2]
    st, _ = traced["ltx-video-13b-0.9.8-dev"]  # 512x704 in two passes: the second at 640x896 (VAE factor 32)
    assert st.grid == (21, 20, 28)


def test_cli_published_architecture_at_full_width(tmp_path, monkeypatch):
    """``vidax bench --random-dit --published``: the id's published width (Wan2.1-1.3B, 1536) with one block at a
    tiny size, the report written, the temporary layout folder removed."""
    from vidax_core.cli import main

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.makedirs(tmp_path / "tmp")
    rc = main(["bench", os.path.join(CONFIGS, "wan21_1_3b_480p.yaml"), "sampling.height=32", "sampling.width=32",
               "sampling.num_frames=5", "sampling.max_sequence_length=8", "--random-dit", "--published",
               "--random-blocks", "1", "--attention", "xla", "--repeats", "1", "--quiet", "--out",
               str(tmp_path / "out"), "--name", "w"])
    assert rc == 0
    rep = json.loads((tmp_path / "out" / "w.json").read_text())
    assert rep["model"] == "wan2.1-t2v-1.3b" and rep["blocks"] == {"blocks": 1} and rep["grid"] == [2, 4, 4]
    assert rep["rows"][0]["call_s"] > 0 and rep["flops_per_call"] > 0
    assert os.listdir(tmp_path / "tmp") == []
