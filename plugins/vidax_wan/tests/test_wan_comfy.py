"""A ComfyUI models folder of single files runs like its diffusers-layout twin (`model.checkpoint=` the folder).

The folder is written as Comfy-Org's ``Wan_2.1_ComfyUI_repackaged`` lays it out (``split_files/``): the DiT in
fp16 under Wan's original names (``diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors``, beside a 14B file the run
must not pick), the UMT5 encoder as ComfyUI's ``scaled_fp8`` file (transformers names, per-tensor
``scale_weight``, the ``scaled_fp8`` marker, its SentencePiece model as ``spiece_model``) and the VAE under its
original names. Its configs are not in the files: they come from wan2.1-t2v-1.3b's published layout and the tensor
shapes. The twin holds the same weights (the fp16 DiT's values, the encoder's dequantised ones) in diffusers layout
with the same tokenizer as ``tokenizer.json``. The DiT is 1.3B-shaped in its head width (128), tiny otherwise.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from vidax_core.testing.tiny.wan_original_keys import DIT_INV, inverse, vae_inverse

ASSETS = Path(__file__).resolve().parents[1] / "src" / "vidax_wan" / "assets" / "tiny-random"
SIZE, FRAMES, STEPS = 32, 5, 2
DIT = dict(num_attention_heads=2, attention_head_dim=128, in_channels=4, out_channels=4, text_dim=32, freq_dim=16,
           ffn_dim=64, num_layers=2, patch_size=(1, 2, 2), cross_attn_norm=True, qk_norm="rms_norm_across_heads",
           eps=1e-6, rope_max_seq_len=1024)


def _spiece_and_tokenizer(dest: Path) -> bytes:
    """A tiny SentencePiece model (its bytes) and the same tokenizer as transformers' tokenizer.json in ``dest``."""
    import sentencepiece as spm
    from transformers import T5TokenizerFast

    from vidax_core.testing.tokenizers import _CORPUS

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_CORPUS * 4), model_writer=model, model_type="unigram",
                                   vocab_size=90, hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    raw = model.getvalue()
    (dest / "spiece.model").write_bytes(raw)
    T5TokenizerFast.from_pretrained(str(dest), extra_ids=0).save_pretrained(str(dest / "fast"))
    return raw


def _fp8_scaled(t5: dict) -> tuple[dict, dict]:
    """(ComfyUI scaled_fp8 tensors, the dequantised float32 weights) of a T5 encoder's block matrices."""
    from vidax_core.testing.comfy import scaled_fp8

    t5 = {k: v.astype(np.float16) if k == "shared.weight" else v for k, v in t5.items()}
    return scaled_fp8(t5, lambda k, v: k.startswith("encoder.block.") and v.ndim == 2
                      and "relative_attention_bias" not in k)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from diffusers import WanTransformer3DModel

    root = tmp_path_factory.mktemp("comfy")
    twin, comfy = root / "twin", root / "ComfyUI" / "split_files"
    shutil.copytree(ASSETS, twin)
    for sub in ("diffusion_models", "text_encoders", "vae"):
        (comfy / sub).mkdir(parents=True)
    tok = root / "tok"
    tok.mkdir()
    spiece = _spiece_and_tokenizer(tok)
    shutil.rmtree(twin / "tokenizer")
    shutil.copytree(tok / "fast", twin / "tokenizer")

    torch.manual_seed(0)
    dit = WanTransformer3DModel(**DIT).eval()
    with torch.no_grad():
        for p in dit.parameters():  # non-zero biases and norms, as every parity test here
            p.add_(0.05 * torch.randn_like(p))
    sd = {k: v.detach().numpy().astype(np.float16) for k, v in dit.state_dict().items()}
    save_file({inverse(k, DIT_INV): v for k, v in sd.items()},
              str(comfy / "diffusion_models" / "wan2.1_t2v_1.3B_fp16.safetensors"))
    save_file({"blocks.0.ffn.0.weight": np.zeros((2, 2), np.float16)},
              str(comfy / "diffusion_models" / "wan2.1_t2v_14B_fp8_e4m3fn.safetensors"))  # another model's file
    (twin / "transformer" / "config.json").write_text(json.dumps({"_class_name": "WanTransformer3DModel", **DIT}))
    save_file({k: v.astype(np.float32) for k, v in sd.items()},
              str(twin / "transformer" / "diffusion_pytorch_model.safetensors"))

    t5 = {k: v for k, v in load_file(str(ASSETS / "text_encoder" / "model.safetensors")).items()
          if k.startswith("encoder.block.") or k in ("shared.weight", "encoder.final_layer_norm.weight")}
    scaled, deq = _fp8_scaled(t5)
    scaled["spiece_model"] = np.frombuffer(spiece, np.uint8).copy()
    save_file(scaled, str(comfy / "text_encoders" / "umt5_xxl_fp8_e4m3fn_scaled.safetensors"))
    save_file(deq, str(twin / "text_encoder" / "model.safetensors"))
    te = twin / "text_encoder" / "config.json"  # the UMT5-XXL config's relative-attention distance, as published
    te.write_text(json.dumps({**json.loads(te.read_text()), "relative_attention_max_distance": 128}))

    vae_cfg = json.loads((ASSETS / "vae" / "config.json").read_text())
    vae = load_file(str(ASSETS / "vae" / "diffusion_pytorch_model.safetensors"))
    save_file({vae_inverse(k, vae_cfg["num_res_blocks"], False): v for k, v in vae.items()},
              str(comfy / "vae" / "wan_2.1_vae.safetensors"))
    z = vae_cfg["z_dim"]  # a VAE that is not the published one has no latent normalisation (original layout rule)
    (twin / "vae" / "config.json").write_text(json.dumps({**vae_cfg, "latents_mean": [0.0] * z,
                                                          "latents_std": [1.0] * z}))
    return {"twin": twin, "comfy": root / "ComfyUI", "root": root}


def _run(ckpt, noise, *extra):
    import vidax

    pipe = vidax.load("wan2.1-t2v-1.3b", f"model.checkpoint={ckpt}", f"sampling.height={SIZE}",
                      f"sampling.width={SIZE}", f"sampling.num_frames={FRAMES}", f"sampling.num_steps={STEPS}",
                      "sampling.max_sequence_length=16", "sampling.scheduler={name: unipc, flow_shift: 3.0}",
                      *extra, quiet=True)
    try:
        out = pipe(prompt="a red fox in the snow", negative_prompt="blurry", initial_noise=noise)
        return np.asarray(out.latents), out.metrics["text_encoders"]["dtypes"]
    finally:
        pipe.close()


def test_comfy_folder_runs_like_the_diffusers_twin(folders, tmp_path):
    lat = (1, 4, (FRAMES - 1) // 4 + 1, SIZE // 8, SIZE // 8)
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).standard_normal(lat).astype(np.float32))
    twin, twin_dtypes = _run(folders["twin"], str(noise))
    comfy, comfy_dtypes = _run(folders["comfy"], str(noise))
    assert set(twin_dtypes.values()) == {"float32"}  # the scaled fp8 UMT5 keeps its kernels 8-bit, as stored
    assert set(comfy_dtypes.values()) == {"float8_e4m3fn"}, comfy_dtypes
    assert twin.shape == comfy.shape == lat
    err = float(np.abs(twin - comfy).max() / np.abs(twin).max())
    print(f"wan comfy vs diffusers: max abs {err:.1e} of the largest value")
    assert err <= 1e-4, err
    assert np.abs(twin - np.load(noise)).max() > 1e-3  # the model ran


def test_missing_components_are_one_line(folders, tmp_path):
    from vidax_core.api import resolve_config
    from vidax_core.errors import UserError
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins

    part = tmp_path / "partial"
    (part / "diffusion_models").mkdir(parents=True)
    shutil.copy(folders["comfy"] / "split_files" / "diffusion_models" / "wan2.1_t2v_1.3B_fp16.safetensors",
                part / "diffusion_models")
    plugins = get_plugins()
    cfg = resolve_config("wan2.1-t2v-1.3b", [f"model.checkpoint={part}"], plugins)
    with pytest.raises(UserError) as err:
        checkpoint_for_run(cfg, plugins.registry.get("wan2.1-t2v-1.3b"), plugins)
    text = str(err.value)
    assert "text_encoder (text_encoders/umt5_xxl*)" in text and "vae (vae/wan_2.1_vae*)" in text, text
    assert "transformer" not in text.split("lacks")[1].split(":")[0], text

    files = {"transformer": str(part / "diffusion_models" / "wan2.1_t2v_1.3B_fp16.safetensors"),
             "vae": str(tmp_path / "nowhere.safetensors")}
    cfg = resolve_config("wan2.1-t2v-1.3b", [f"model.files={json.dumps(files)}"], plugins)
    with pytest.raises(UserError, match="model.files.vae: .*nowhere.safetensors does not exist"):
        checkpoint_for_run(cfg, plugins.registry.get("wan2.1-t2v-1.3b"), plugins)


def test_dry_run_sizes_the_8bit_encoder_as_stored(folders, capfd):
    """The dry run states the scaled fp8 UMT5 at its stored 8-bit weights and the run's compute dtype."""
    from vidax_core import cli

    code = cli.main(["run", "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={folders['comfy']}", "model.dtype=bfloat16",
                     f"sampling.height={SIZE}", f"sampling.width={SIZE}", f"sampling.num_frames={FRAMES}",
                     "--dry-run"])
    out, err = capfd.readouterr()
    assert code == 0, err
    line = next((ln for ln in (out + err).splitlines() if "text encoder" in ln), out + err)
    assert "at float8_e4m3fn weights, bfloat16 compute" in line, out + err
