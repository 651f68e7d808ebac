"""The torch-free random checkpoint writer (``vidax bench --write-random-checkpoint``): every registered
model id's published layout written as a folder its own loaders accept, the recorded layouts equal to what
diffusers / transformers build, the writer's memory small, the layer cuts consistent."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from repo_models import repo_specs
from vidax_core.bench import random_checkpoint as rc
from vidax_core.errors import UserError
from vidax_core.report import memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDS = sorted(s.id for s in repo_specs())  # the repository's ids: each ships its published layout
# LTX-2.5's text encoder: the published config is not known here (docs/models/ltx.md), so its layout has none
NO_TEXT_LAYOUT = {"ltx-2.5-22b-dev", "ltx-2.5-22b-distilled"}


@pytest.mark.parametrize("model_id", IDS)
def test_every_id_writes_a_folder_its_loaders_accept(model_id, tmp_path):
    out = tmp_path / "ckpt"
    summary = rc.write_random_checkpoint(model_id, str(out), blocks=1, fill="zeros", log=lambda _m: None)
    assert (out / "model_index.json").exists() and summary["components"]
    if model_id in NO_TEXT_LAYOUT:
        with pytest.raises(UserError):  # the placeholder config names no architecture: a one-line refusal
            rc.check_with_loaders(model_id, str(out))
        return
    done = rc.check_with_loaders(model_id, str(out))
    assert done[0].startswith("transformer") and "vae" in done and "text encoder" in done, done


def test_the_recorded_layout_is_what_diffusers_builds():
    """The shipped layout of Wan2.1-T2V-14B equals the state dict diffusers' and transformers' classes build from
    its own configs on the meta device (vidax_core.bench.published_layout, the generator)."""
    pytest.importorskip("torch")
    from vidax_core.bench import published_layout as published_layouts

    with gzip.open(rc.layout_path("wan2.1-t2v-14b"), "rt") as f:
        lay = json.load(f)
    index = lay["files"]["model_index.json"]
    for comp in ("transformer", "vae", "text_encoder"):
        folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"vidax-layout-{os.getpid()}", comp)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(lay["components"][comp]["files"]["config.json"])
        built = published_layouts.tensors_of(folder, index.get(comp), index.get("_class_name"))
        assert built == lay["components"][comp]["tensors"], comp
    n = sum(int(np.prod(s)) for s, _ in lay["components"]["transformer"]["tensors"].values())
    assert 14.0e9 < n < 14.6e9  # the model card's 14B


def test_written_values_shapes_and_dtypes(tmp_path):
    """A cut Wan2.1-1.3B written with fp8 blocks: the real key names, the block matrices fp8 and everything else
    of the denoiser bf16, VAE float32, values finite and of a sensible scale, memory small while writing."""
    from vidax_core.io.safetensors import SafetensorsFile

    rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "warm"), blocks=1, fill="zeros",
                               log=lambda _m: None)  # the modules the writer imports, loaded before measuring
    with memory.window() as w:
        summary = rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "c"), blocks=2,
                                             weight_dtype="float8_e4m3fn", log=lambda _m: None)
    written = sum(c.get("bytes", 0) for c in summary["components"].values()) / 2**20
    print(f"writer: {written:.0f} MiB written, the process grew {w.growth_mb:.0f} MiB")
    assert w.growth_mb < 160 and written > 900  # a few value pools, never a tensor's or a file's bytes
    dit = SafetensorsFile(str(tmp_path / "c" / "transformer" / "diffusion_pytorch_model.safetensors"))
    assert sorted({k.split(".")[1] for k in dit if k.startswith("blocks.")}) == ["0", "1"]
    assert dit.dtype("blocks.0.attn1.to_q.weight").name == "float8_e4m3fn"
    assert dit.dtype("blocks.0.norm2.weight").name == "bfloat16" and dit.dtype("proj_out.weight").name == "bfloat16"
    q = np.asarray(dit["blocks.1.ffn.net.0.proj.weight"], np.float32)
    assert np.isfinite(q).all() and 0.3 / np.sqrt(q.shape[1]) < q.std() < 3.0 / np.sqrt(q.shape[1])
    assert json.loads((tmp_path / "c" / "transformer" / "config.json").read_text())["num_layers"] == 2
    vae = SafetensorsFile(str(tmp_path / "c" / "vae" / "diffusion_pytorch_model.safetensors"))
    assert {vae.dtype(k).name for k in vae} == {"float32"}
    text = json.loads((tmp_path / "c" / "text_encoder" / "config.json").read_text())
    assert text["num_layers"] == 1 and text["d_model"] == 4096  # one layer at the real width


def test_int8_blocks_carry_per_channel_scales(tmp_path):
    rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "c"), blocks=1, weight_dtype="int8",
                               fill="zeros", log=lambda _m: None)
    from vidax_core.io.safetensors import SafetensorsFile

    dit = SafetensorsFile(str(tmp_path / "c" / "transformer" / "diffusion_pytorch_model.safetensors"))
    assert dit.dtype("blocks.0.attn1.to_q.weight").name == "int8"
    scale = "blocks.0.attn1.to_q.weight_scale"  # LightX2V's layout: one fp32 scale per output channel
    assert scale in dit and dit.shape(scale) == (1536,) and dit.dtype(scale).name == "float32"


def test_refusals_are_one_line(tmp_path):
    with pytest.raises(UserError, match="--weight-dtype"):
        rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "a"), weight_dtype="fp4")
    rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "b"), blocks=1, fill="zeros", log=lambda _m: None)
    with pytest.raises(UserError, match="already holds a checkpoint"):
        rc.write_random_checkpoint("wan2.1-t2v-1.3b", str(tmp_path / "b"), fill="zeros")


def test_cutting_layers_follows_the_config():
    config = {"num_layers": 4, "num_attention_heads": 4, "text_config": {"layer_types": ["a", "b", "a", "b"]}}
    tensors = {f"blocks.{i}.w": [[2, 2], "float32"] for i in range(4)} | {"head.w": [[2], "float32"]}
    got, kept, cut = rc.cut_layers(config, tensors, 2)
    assert got["num_layers"] == 2 and got["num_attention_heads"] == 4  # only the count named like a layer count
    assert got["text_config"]["layer_types"] == ["a", "b"] and cut == {"blocks": 4}
    assert sorted(kept) == ["blocks.0.w", "blocks.1.w", "head.w"]


@pytest.mark.parametrize("model_id, component, key, matrix, width", [
    ("ltx-2-19b-dev", "connectors", "text_proj_in_factor", "text_proj_in.weight", 3840 * 2),  # embeddings + 1
    ("cosmos-predict2.5-2b", "transformer", "crossattn_proj_in_channels", "crossattn_proj.0.weight", 3584),
])
def test_a_reader_of_every_text_layer_follows_the_cut(model_id, component, key, matrix, width, tmp_path):
    """LTX-2's connectors and Cosmos-Predict2.5's DiT read every hidden state of their text encoder: the writer cuts
    the encoder to one layer anyway and scales the reader's config and input matrix with it (its family's
    ``text_layer_readers``), so the one-layer stand-in checkpoint loads with the real denoiser."""
    from vidax_core.io.safetensors import SafetensorsFile

    out = tmp_path / "c"
    rc.write_random_checkpoint(model_id, str(out), blocks=1, fill="zeros", log=lambda _m: None)
    text = json.loads((out / "text_encoder" / "config.json").read_text())
    assert (text.get("text_config") or text)["num_hidden_layers"] == 1
    assert json.loads((out / component / "config.json").read_text())[key] in (2, width)
    (name,) = (f for f in os.listdir(out / component) if f.endswith(".safetensors"))
    assert SafetensorsFile(str(out / component / name)).shape(matrix)[-1] == width
    assert rc.check_with_loaders(model_id, str(out))  # the family's own checks and loaders accept the folder


def test_a_reader_whose_width_is_no_multiple_is_refused():
    from vidax_core.bench.text_layers import TextLayerReader, follow_text_cut

    plans = {"text_encoder": ({"num_hidden_layers": 1}, {}, {}),
             "reader": ({"width": 10}, {"proj.weight": [[4, 10], "float32"]}, {})}
    reader = TextLayerReader("reader", "width", r"proj\.weight", offset=1)
    follow_text_cut(plans, [reader], {"text_encoder": 4})  # 10 = 2 x (4 + 1): scaled to 2 x (1 + 1)
    assert plans["reader"][0]["width"] == 4 and plans["reader"][1]["proj.weight"][0] == [4, 4]
    plans["reader"] = ({"width": 11}, {}, {})
    with pytest.raises(ValueError, match="not a multiple"):
        follow_text_cut(plans, [reader], {"text_encoder": 4})
