"""LTX-2.0 from a ComfyUI models folder (or ``model.files``) runs like its diffusers-layout twin.

The folder holds what a ComfyUI user of LTX-2 has: Lightricks' fp8 release file in ``checkpoints/`` (DiT, text
connectors and their projection, video VAE, audio VAE, vocoder under ltx-core's names, the configs in its
metadata, the blocks' attention and MLP matrices plain float8_e4m3fn; written by
:func:`test_ltx2_release.write_release` from a tiny diffusers pipeline) beside other models' files the run must not
pick, and Comfy-Org's Gemma-3 file in ``text_encoders/``: transformers' language model flattened to ``model.*``,
the vision tower as ``vision_model.*``, the block matrices as ComfyUI ``scaled_fp8`` (per-tensor ``scale_weight``,
the marker) and its SentencePiece model as ``spiece_model``. Its config is not in the file: it is ltx-2-19b-dev's
published one with the sizes of the tensors. The twin holds the same weights (the fp8 and the Gemma kernels' values
in float32) in diffusers layout, its Gemma config the published one at the tiny sizes, and transformers'
``GemmaTokenizer`` of the same SentencePiece model as ``tokenizer.json``.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from test_ltx2_release import MONOLITH, write_release  # noqa: E402

MODEL_ID = "ltx-2-19b-dev"
GEMMA = "gemma_3_12B_it_fp8_scaled.safetensors"
FP8_RELEASE = "ltx-2-19b-dev-fp8.safetensors"
#: the DiT matrices Lightricks' fp8 release file stores as plain float8_e4m3fn (its blocks' attention and MLP)
FP8_KERNEL = re.compile(r"transformer_blocks\.\d+\..*(to_[qkv]|to_out\.0|net\.0\.proj|net\.2)\.weight$")


def _gemma_file(twin_te: dict, spiece: bytes) -> tuple[dict, dict]:
    """(Comfy-Org's Gemma-3 file tensors, the twin's text_encoder tensors)."""
    from vidax_core.testing.comfy import scaled_fp8

    def comfy_key(k: str) -> str:
        k = re.sub(r"^(model\.language_model|language_model\.model)\.", "model.", k)
        k = re.sub(r"^(model\.)?vision_tower\.(vision_model\.)?", "vision_model.", k)
        return re.sub(r"^model\.multi_modal_projector\.", "multi_modal_projector.", k)

    named = {comfy_key(k): v for k, v in twin_te.items() if k != "lm_head.weight"}
    comfy, deq = scaled_fp8(named, lambda k, v: bool(re.match(r"model\.layers\.\d+\.(self_attn|mlp)\..*\.weight$", k))
                            and v.ndim == 2)
    comfy["spiece_model"] = np.frombuffer(spiece, np.uint8).copy()
    inverse = {comfy_key(k): k for k in twin_te}
    return comfy, {inverse[k]: v for k, v in deq.items()}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    import ml_dtypes
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from vidax_core.io.published import PublishedCheckpoint
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.comfy import gemma_spiece
    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

    root = tmp_path_factory.mktemp("ltx2_comfy")
    _, twin = build_tiny_ltx2_pipeline(root / "tiny", "ltx2.0", seed=7)
    shutil.rmtree(twin / "tokenizer")
    spiece = gemma_spiece(twin / "tokenizer")
    te_file = next((twin / "text_encoder").glob("*.safetensors"))
    te = load_file(str(te_file))
    vocab = next(v for k, v in te.items() if k.endswith("language_model.model.embed_tokens.weight")).shape[0]
    assert json.loads((twin / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"].__len__() <= vocab
    comfy_te, deq = _gemma_file(te, spiece)
    for f in (twin / "text_encoder").glob("*.safetensors*"):
        f.unlink()
    save_file(deq, str(te_file.parent / "model.safetensors"))
    # the twin's Gemma config: the published one (what a config-less file reads with) at the tiny's own sizes
    tiny = json.loads((twin / "text_encoder" / "config.json").read_text())["text_config"]
    published = PublishedCheckpoint(MODEL_ID, get_plugins()).config("text_encoder")
    published = {k: v for k, v in published.items() if not k.startswith("_")}
    sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "head_dim")
    text = {**published["text_config"], **{k: tiny[k] for k in sizes},
            "layer_types": published["text_config"]["layer_types"][:tiny["num_hidden_layers"]]}
    (twin / "text_encoder" / "config.json").write_text(json.dumps({**published, "text_config": text}))

    comfy = root / "ComfyUI" / "models"
    for sub in ("checkpoints", "text_encoders", "diffusion_models", "vae"):
        (comfy / sub).mkdir(parents=True)
    dit_file = twin / "transformer" / "diffusion_pytorch_model.safetensors"  # the blocks' matmuls at fp8 values
    dit = load_file(str(dit_file))
    save_file({k: v.astype(ml_dtypes.float8_e4m3fn).astype(np.float32) if FP8_KERNEL.match(k) and v.ndim == 2
               else v for k, v in dit.items()}, str(dit_file))
    write_release(twin, root / "release", "ltx2.0")
    with safe_open(str(root / "release" / MONOLITH), "np") as f:  # Lightricks' fp8 file: plain fp8, no scales
        meta = f.metadata()
        release = {k: f.get_tensor(k) for k in f.keys()}
    save_file({k: v.astype(ml_dtypes.float8_e4m3fn) if FP8_KERNEL.match(k.split("model.diffusion_model.")[-1])
               and v.ndim == 2 else v for k, v in release.items()}, str(comfy / "checkpoints" / FP8_RELEASE),
              metadata=meta)
    save_file(comfy_te, str(comfy / "text_encoders" / GEMMA))
    for other in ("diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors", "vae/wan_2.1_vae.safetensors",
                  "text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"):  # another model's files
        save_file({"x": np.zeros(2, np.float16)}, str(comfy / other))
    return {"twin": twin, "comfy": root / "ComfyUI", "models": comfy, "root": root}


BASE = [f"model.id={MODEL_ID}", "prompt=a small red fox barks in the snow", "negative_prompt=blurry",
        "sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9",
        "sampling.max_sequence_length=16", "options.spatio_temporal_guidance_blocks=[1]", "parallel.dp=1"]


def test_comfy_folder_and_files_run_like_the_diffusers_twin(folders):
    """The ComfyUI folder, and the same two files named with ``model.files``, give the twin's video and audio
    latents (relative L2 <= 1e-4: the fp8 DiT and Gemma kernels dequantise inside their matmuls)."""
    from vidax_core.testing.runs import run_many

    models = folders["models"]
    files = {"transformer": str(models / "checkpoints" / FP8_RELEASE),
             "text_encoder": str(models / "text_encoders" / GEMMA)}
    runs = run_many(BASE, {"diffusers": (f"model.checkpoint={folders['twin']}",),
                           "comfy": (f"model.checkpoint={folders['comfy']}",),
                           "files": (f"model.files={json.dumps(files)}",)}, devices=1)
    for name in ("comfy", "files"):
        assert "error" not in runs[name], runs[name]
        print(f"ltx-2 {name} vs diffusers run: rel {runs[name]['rel']:.1e}")
        assert runs[name]["rel"] <= 1e-4, runs[name]
        # the fp8 release file's block matrices stay 8-bit (the twin holds their values in float32)
        assert runs[name]["peak_resident_weight_bytes"] < runs["diffusers"]["peak_resident_weight_bytes"], runs


def test_scaled_fp8_gemma_keeps_its_kernels_8bit(folders):
    """The Gemma file's block matrices load 8-bit as stored (float8_e4m3fn, held as its bits on CPU), the
    embedding and norms in the compute dtype; the config is the published one at the file's sizes."""
    import jax
    from flax import nnx

    from vidax_core.api import resolve_config
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins
    from vidax_core.quant.cpu_bits import BITS, FLOAT8
    from vidax_ltx import ltx2_text

    plugins = get_plugins()
    cfg = resolve_config(MODEL_ID, [f"model.checkpoint={folders['comfy']}", *BASE[-2:-1]], plugins)
    ckpt = checkpoint_for_run(cfg, plugins.registry.get(MODEL_ID), plugins)
    text = ckpt.config("text_encoder")["text_config"]
    assert (text["hidden_size"], text["num_hidden_layers"], text["sliding_window"]) == (16, 3, 1024), text
    enc = ltx2_text.load(ckpt, dtype=np.float32)
    leaves = jax.tree.leaves(nnx.state(enc.gemma))
    stored = {FLOAT8.name if np.dtype(a.dtype) == BITS else np.dtype(a.dtype).name for a in leaves if a.ndim >= 2}
    assert stored == {"float8_e4m3fn", "float32"}, stored


def test_gemma_file_tokenizes_as_transformers(folders):
    """The Gemma file's SentencePiece model tokenizes as transformers' GemmaTokenizer of it (the twin's
    tokenizer.json): ``<bos>`` first, no end token, left padding."""
    from vidax_core.encoders.tokenizer import TextTokenizer
    from vidax_core.io.component_files import GEMMA_SPIECE_CONFIG, spiece_folder
    from vidax_core.io.checkpoint import TensorSource
    from vidax_ltx.ltx2_text import tokenize

    src = TensorSource([str(folders["models"] / "text_encoders" / GEMMA)])
    ours = TextTokenizer.from_dir(spiece_folder(src, GEMMA, GEMMA_SPIECE_CONFIG))
    ref = TextTokenizer.from_dir(folders["twin"] / "tokenizer")
    prompts = ["a small red fox barks in the snow", "", "  two  spaces "]
    for a, b in zip(tokenize(ours, prompts, 12), tokenize(ref, prompts, 12)):
        np.testing.assert_array_equal(a, b)


def test_missing_components_are_one_line(folders, tmp_path):
    """A folder without the Gemma file (its text_encoders/ holding another model's encoder) says which file to add,
    in one line; so does ``model.files`` naming only the release file."""
    from vidax_core.api import resolve_config
    from vidax_core.errors import UserError
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins

    part = tmp_path / "models"
    shutil.copytree(folders["models"], part)
    (part / "text_encoders" / GEMMA).unlink()
    plugins = get_plugins()
    spec = plugins.registry.get(MODEL_ID)
    for override in (f"model.checkpoint={part}",
                     f"model.files={json.dumps({'transformer': str(part / 'checkpoints' / FP8_RELEASE)})}"):
        cfg = resolve_config(MODEL_ID, [override], plugins)
        with pytest.raises(UserError) as err:
            checkpoint_for_run(cfg, spec, plugins)
        text = str(err.value)
        assert "\n" not in text and "text_encoder" in text and "text_encoders/gemma_3_12" in text.lower(), text
        assert "transformer (" not in text and "vae (" not in text, text


def test_the_bf16_files_are_preferred(tmp_path):
    """Of the release's bf16 and fp8 files and Comfy-Org's Gemma variants the widest is taken (a name without a
    dtype is the release's bf16); the fp4 files, and the distilled model's, are not picked."""
    from vidax_core.io.component_files import find_files
    from vidax_core.plugins import get_plugins

    names = {"checkpoints": ("ltx-2-19b-dev-fp8.safetensors", "ltx-2-19b-dev.safetensors",
                             "ltx-2-19b-dev-fp4.safetensors", "ltx-2-19b-distilled.safetensors"),
             "text_encoders": ("gemma_3_12B_it_fp8_scaled.safetensors", "gemma_3_12B_it.safetensors",
                               "gemma_3_12B_it_fp4_mixed.safetensors")}
    for sub, files in names.items():
        (tmp_path / sub).mkdir()
        for name in files:
            (tmp_path / sub / name).touch()
    spec = get_plugins().registry.get(MODEL_ID)
    found, _ = find_files(str(tmp_path), spec, ["transformer", "vae", "text_encoder"])
    assert {k: v.split("/")[-1] for k, v in found.items()} == {
        "transformer": "ltx-2-19b-dev.safetensors", "vae": "ltx-2-19b-dev.safetensors",
        "text_encoder": "gemma_3_12B_it.safetensors"}
    (tmp_path / "checkpoints" / "ltx-2-19b-dev.safetensors").unlink()
    assert find_files(str(tmp_path), spec, ["transformer"])[0]["transformer"].endswith(FP8_RELEASE)
