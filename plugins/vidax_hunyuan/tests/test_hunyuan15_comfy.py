"""HunyuanVideo-1.5 from a ComfyUI models folder runs like its diffusers-layout twin.

The folder is laid out as Comfy-Org's ``HunyuanVideo_1.5_repackaged`` ``split_files/``: the 480p text-to-video DiT
in fp16 under the release's names (``diffusion_models/hunyuanvideo1.5_480p_t2v_fp16.safetensors``, beside the
720p file the run must not pick), Qwen2.5-VL as ComfyUI's ``scaled_fp8`` file (the composite model's ``model.``
names, vision tower and LM head beside them, per-tensor ``scale_weight``, the marker), the glyph byT5 in fp16
(transformers names) and the VAE in fp16 under the release's names. No config is in the files: each is the id's
published one, the sizes read from the tensors. The tokenizers are not in the files either: they come from the id's
hub repo, here a Hugging Face cache seeded with the twin's (offline). The twin holds the same weights (fp16 values,
Qwen's dequantised kernels) in diffusers layout with those configs. Its DiT and Qwen are tiny but for their head
width (128: the published RoPE axes and Qwen's mrope sections fix it); Qwen has 4 layers, so the hidden state the
pipeline takes (the third from last) has been through two of its 8-bit blocks.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_hunyuan15_dit import to_original  # noqa: E402
from test_hunyuan15_release import vae_to_original  # noqa: E402

from vidax_core.testing.runs import run_many  # noqa: E402

MODEL_ID = "hunyuanvideo-1.5-t2v-480p"
DIT = dict(num_attention_heads=1, attention_head_dim=128, rope_axes_dim=(16, 56, 56), rope_theta=256.0,
           target_size=640, text_embed_dim=128)
QWEN = dict(hidden_size=128, intermediate_size=32, num_hidden_layers=4, num_attention_heads=1,
            num_key_value_heads=1)
FILES = {"transformer": "diffusion_models/hunyuanvideo1.5_480p_t2v_fp16.safetensors",
         "text_encoder": "text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors",
         "text_encoder_2": "text_encoders/byt5_small_glyphxl_fp16.safetensors",
         "vae": "vae/hunyuanvideo15_vae_fp16.safetensors"}


def _fp16(sd: dict) -> tuple[dict, dict]:
    """(fp16 tensors, their float32 values)."""
    half = {k: v.astype(np.float16) for k, v in sd.items()}
    return half, {k: v.astype(np.float32) for k, v in half.items()}


def _qwen(tokenizer_len: int) -> dict:
    """A random Qwen2.5-VL text tower at :data:`QWEN` sizes and the published RoPE (mrope 16/24/24)."""
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel

    from vidax_core.testing.reference import randomize_

    torch.manual_seed(5)
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}
    model = Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(vocab_size=tokenizer_len, rope_parameters=rope, **QWEN))
    randomize_(model.eval().float(), 6, 0.3)
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def _seed_hub(cache, repo: str, twin) -> None:
    """A Hugging Face cache holding ``repo``'s tokenizer folders (the twin's), as a first download leaves it."""
    org, name = repo.split("/")
    base = cache / f"models--{org}--{name}"
    snap = base / "snapshots" / ("0" * 40)
    for part in ("tokenizer", "tokenizer_2"):
        shutil.copytree(twin / part, snap / part)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text("0" * 40)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from safetensors.numpy import load_file, save_file

    from vidax_core.io.published import PublishedCheckpoint
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.comfy import scaled_fp8
    from vidax_hunyuan.hunyuan15_tiny import one_thread, save_tiny_hunyuan15

    root = tmp_path_factory.mktemp("h15comfy")
    twin, comfy = root / "twin", root / "ComfyUI" / "split_files"
    with one_thread():
        _, pipe = save_tiny_hunyuan15(twin, seed=3, dit=DIT)
    published = PublishedCheckpoint(MODEL_ID, get_plugins())

    def write_twin(part: str, tensors: dict, config: dict) -> None:
        for f in (twin / part).glob("*.safetensors*"):
            f.unlink()
        name = "model.safetensors" if part.startswith("text_encoder") else "diffusion_pytorch_model.safetensors"
        save_file(tensors, str(twin / part / name))
        (twin / part / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                             if not k.startswith("_vidax")}))

    def config(part: str, **sizes) -> dict:
        return {**published.config(part), **sizes}

    def twin_config(part: str) -> dict:
        return json.loads((twin / part / "config.json").read_text())

    for sub in ("diffusion_models", "text_encoders", "vae"):
        (comfy / sub).mkdir(parents=True)
    dit, dit32 = _fp16(load_file(str(twin / "transformer" / "diffusion_pytorch_model.safetensors")))
    save_file(to_original(dit), str(comfy / FILES["transformer"]))
    write_twin("transformer", dit32, twin_config("transformer"))
    save_file({"img_in.proj.weight": np.zeros((2, 2), np.float16)},
              str(comfy / "diffusion_models" / "hunyuanvideo1.5_720p_t2v_fp16.safetensors"))  # another id's DiT

    qwen = {f"model.{k}": v for k, v in _qwen(len(pipe.tokenizer)).items()}
    qwen["lm_head.weight"] = qwen["model.embed_tokens.weight"]
    qwen["visual.patch_embed.proj.weight"] = np.ones((4, QWEN["hidden_size"]), np.float32)
    scaled, deq = scaled_fp8(qwen, lambda k, v: bool(re.match(r"model\.layers\.\d+\.(self_attn|mlp)\.\w+\.weight$", k)))
    save_file(scaled, str(comfy / FILES["text_encoder"]))
    types = published.config("text_encoder")["layer_types"][:QWEN["num_hidden_layers"]]
    write_twin("text_encoder", {k[len("model."):]: v for k, v in deq.items() if k.startswith("model.")},
               config("text_encoder", vocab_size=len(pipe.tokenizer), head_dim=128, layer_types=types, **QWEN))

    byt5, byt5_32 = _fp16(load_file(str(twin / "text_encoder_2" / "model.safetensors")))
    save_file(byt5, str(comfy / FILES["text_encoder_2"]))
    t5 = twin_config("text_encoder_2")
    write_twin("text_encoder_2", byt5_32, config("text_encoder_2", **{k: t5[k] for k in (
        "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads", "relative_attention_num_buckets")}))

    vae, vae32 = _fp16(load_file(str(twin / "vae" / "diffusion_pytorch_model.safetensors")))
    save_file(vae_to_original(vae), str(comfy / FILES["vae"]))
    v = twin_config("vae")
    write_twin("vae", vae32, config("vae", **{k: v[k] for k in (
        "in_channels", "out_channels", "latent_channels", "block_out_channels", "layers_per_block")}))
    (twin / "scheduler" / "scheduler_config.json").write_text(json.dumps(published.config("scheduler")))

    hub = root / "hub"
    _seed_hub(hub, get_plugins().registry.get(MODEL_ID).hub_repo, twin)
    return {"twin": twin, "comfy": root / "ComfyUI", "hub": hub}


@pytest.fixture
def hub(folders, monkeypatch):
    """The seeded hub cache, offline, for this process and the runs it starts."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_CACHE", str(folders["hub"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folders["hub"]))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def test_comfy_folder_runs_like_the_diffusers_twin(folders, hub):
    """CFG 6, a quoted prompt through the glyph byT5, 2 steps: the folder's latents are the twin's (relative L2
    <= 1e-4: Qwen's kernels dequantise inside their matmuls); the tokenizers come from the (seeded) hub cache."""
    base = [f"model.id={MODEL_ID}", 'prompt=a neon sign that reads "OPEN" glows in the rain',
            "negative_prompt=blurry", "sampling.num_steps=2", "sampling.height=32", "sampling.width=48",
            "sampling.num_frames=5", "sampling.max_sequence_length=24", "options.tokenizer_2_max_length=16"]
    runs = run_many(base, {"diffusers": [f"model.checkpoint={folders['twin']}"],
                           "comfy": [f"model.checkpoint={folders['comfy']}"]}, devices=1)
    assert "error" not in runs["comfy"], runs["comfy"]
    print(f"hunyuanvideo-1.5 comfy vs diffusers run: rel {runs['comfy']['rel']:.1e}")
    assert runs["comfy"]["rel"] <= 1e-4, runs["comfy"]


def test_files_are_read_as_stored(folders, hub):
    """Each part comes from its file: the DiT, VAE and byT5 configs at the files' sizes, Qwen's kernels 8-bit."""
    from vidax_core.api import resolve_config
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins
    from vidax_core.quant.source import Quantized

    plugins = get_plugins()
    cfg = resolve_config(MODEL_ID, [f"model.checkpoint={folders['comfy']}"], plugins)
    ckpt = checkpoint_for_run(cfg, plugins.registry.get(MODEL_ID), plugins)
    for part, rel in FILES.items():
        assert ckpt.path(part).endswith(rel), (part, ckpt.path(part))
    assert ckpt.config("transformer")["attention_head_dim"] == 128
    assert ckpt.config("vae")["block_out_channels"] == [8, 8, 16, 16, 16]
    assert ckpt.config("text_encoder_2")["d_model"] == 12
    qwen = ckpt.config("text_encoder")
    assert (qwen["hidden_size"], qwen["num_attention_heads"], qwen["head_dim"]) == (128, 1, 128), qwen
    assert isinstance(ckpt.tensors("text_encoder")["layers.0.self_attn.q_proj.weight"], Quantized)
    assert ckpt.require("tokenizer").startswith(str(folders["hub"]))  # fetched once from the id's hub repo


def test_missing_components_are_one_line(folders, tmp_path):
    from vidax_core.api import resolve_config
    from vidax_core.errors import UserError
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins

    part = tmp_path / "split_files"
    shutil.copytree(folders["comfy"] / "split_files", part)
    (part / FILES["text_encoder_2"]).unlink()
    (part / FILES["vae"]).unlink()
    plugins = get_plugins()
    cfg = resolve_config(MODEL_ID, [f"model.checkpoint={part}"], plugins)
    with pytest.raises(UserError) as err:
        checkpoint_for_run(cfg, plugins.registry.get(MODEL_ID), plugins)
    text = str(err.value)
    assert "\n" not in text and "text_encoder_2 (text_encoders/byt5_small_glyphxl*" in text, text
    assert "vae (vae/hunyuanvideo15_vae*)" in text and "transformer (" not in text, text
