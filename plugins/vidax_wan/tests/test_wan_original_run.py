"""`vidax run` on a folder of original Wan-AI release files gives the same latents as on its diffusers twin.

The tiny built-in checkpoint is written out in the original layout (DiT safetensors in two shards with an index,
``Wan2.1_VAE.pth`` and ``models_t5_umt5-xxl-enc-bf16.pth`` via ``torch.save``, ``google/umt5-xxl/`` tokenizer,
config.json with the original field names), using the inverse key maps of ``vidax_core.testing.tiny.wan_original_keys``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from vidax_core.testing.tiny.wan_original_keys import DIT_INV as _DIT_INV, T5_INV as _T5_INV
from vidax_core.testing.tiny.wan_original_keys import inverse as _inverse, vae_inverse as _vae_inverse
from vidax_core.testing.cli import vidax
from vidax_core.testing.cache import suite_cache_dir

ASSETS = Path(__file__).resolve().parents[1] / "src" / "vidax_wan" / "assets" / "tiny-random"
SIZE, FRAMES, STEPS = 32, 5, 3


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def write_original(dest: Path) -> None:
    """The tiny checkpoint in the original Wan-AI release layout."""
    torch = pytest.importorskip("torch")
    dest.mkdir()
    t = _json(ASSETS / "transformer" / "config.json")
    dim = t["num_attention_heads"] * t["attention_head_dim"]
    (dest / "config.json").write_text(json.dumps({
        "_class_name": "WanModel", "_diffusers_version": "0.30.0", "model_type": "t2v", "dim": dim,
        "num_heads": t["num_attention_heads"], "num_layers": t["num_layers"], "in_dim": t["in_channels"],
        "out_dim": t["out_channels"], "ffn_dim": t["ffn_dim"], "freq_dim": t["freq_dim"], "text_len": 512,
        "eps": t["eps"]}))
    dit = load_file(str(ASSETS / "transformer" / "diffusion_pytorch_model.safetensors"))
    original = {_inverse(k, _DIT_INV): v for k, v in dit.items()}
    keys = sorted(original)
    shards = {"diffusion_pytorch_model-00001-of-00002.safetensors": keys[::2],
              "diffusion_pytorch_model-00002-of-00002.safetensors": keys[1::2]}
    weight_map = {}
    for name, ks in shards.items():
        save_file({k: original[k] for k in ks}, str(dest / name))
        weight_map.update({k: name for k in ks})
    (dest / "diffusion_pytorch_model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))

    vae_cfg = _json(ASSETS / "vae" / "config.json")
    vae = load_file(str(ASSETS / "vae" / "diffusion_pytorch_model.safetensors"))
    torch.save({_vae_inverse(k, vae_cfg["num_res_blocks"], False): torch.from_numpy(v.copy()) for k, v in vae.items()},
               dest / "Wan2.1_VAE.pth")

    t5 = load_file(str(ASSETS / "text_encoder" / "model.safetensors"))
    t5 = {k: v for k, v in t5.items()
          if not k.startswith("decoder.") and k not in ("lm_head.weight", "encoder.embed_tokens.weight")}
    torch.save({_inverse(k, _T5_INV): torch.from_numpy(v.copy()) for k, v in t5.items()},
               dest / "models_t5_umt5-xxl-enc-bf16.pth")
    shutil.copytree(ASSETS / "tokenizer", dest / "google" / "umt5-xxl")


def write_twin(dest: Path) -> None:
    """The diffusers-layout tiny checkpoint with the one config value the original layout cannot express set to
    the reference's (UMT5 relative-attention max distance 128, hard-coded in ``wan/modules/t5.py``)."""
    shutil.copytree(ASSETS, dest)
    te = dest / "text_encoder" / "config.json"
    te.write_text(json.dumps({**_json(te), "relative_attention_max_distance": 128}))


def _run(ckpt: Path, tmp: Path, tag: str, *extra: str):
    return vidax(
        "run", "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={ckpt}", "prompt=a red fox in the snow",
        "negative_prompt=blurry", f"sampling.num_steps={STEPS}", f"sampling.height={SIZE}", f"sampling.width={SIZE}",
        f"sampling.num_frames={FRAMES}", "sampling.max_sequence_length=16",
        f"sampling.initial_noise={tmp / 'noise.npy'}", f"output.path={tmp / (tag + '.mp4')}",
        f"output.save_latents={tmp / (tag + '.npy')}", f"runtime.compilation_cache_dir={suite_cache_dir()}", "--quiet",
        *extra, cwd=tmp,
    )


def test_original_folder_runs_like_diffusers_twin(tmp_path):
    write_original(tmp_path / "orig")
    write_twin(tmp_path / "twin")
    lat_f, lat_hw = (FRAMES - 1) // 4 + 1, SIZE // 8
    noise = np.random.default_rng(0).standard_normal((1, 4, lat_f, lat_hw, lat_hw)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    unipc = "sampling.scheduler={name: unipc, flow_shift: 3.0}"
    for tag, ckpt in (("orig", tmp_path / "orig"), ("twin", tmp_path / "twin")):
        proc = _run(ckpt, tmp_path, tag, unipc)
        assert proc.returncode == 0, proc.stderr
    a, b = np.load(tmp_path / "orig.npy"), np.load(tmp_path / "twin.npy")
    assert a.shape == b.shape == noise.shape
    assert np.abs(a - b).max() <= 1e-6, np.abs(a - b).max()
    assert np.abs(a - noise).max() > 1e-3  # the model really ran

    # No sampling.scheduler: the original folder's sampler is the reference UniPC with the model's shift (3.0 here),
    # the same as the twin's scheduler_config.json.
    proc = _run(tmp_path / "orig", tmp_path, "orig_default", "sampling.scheduler=null")
    assert proc.returncode == 0, proc.stderr
    assert np.abs(np.load(tmp_path / "orig_default.npy") - b).max() <= 1e-6


def test_original_folder_errors(tmp_path):
    pytest.importorskip("torch")
    write_original(tmp_path / "orig")
    base = ["run", "--quiet", "model.id=wan2.1-t2v-1.3b", "prompt=x", "sampling.height=32", "sampling.width=32",
            "sampling.num_frames=5", "sampling.num_steps=1", f"output.path={tmp_path / 'o.mp4'}"]

    (tmp_path / "orig" / "google" / "umt5-xxl" / "tokenizer.json").unlink()
    proc = vidax(*base, f"model.checkpoint={tmp_path / 'orig'}", cwd=tmp_path)
    assert proc.returncode != 0
    err = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "tokenizer.json" in err[0] and "hf download google/umt5-xxl" in err[0], proc.stderr

    (tmp_path / "orig" / "Wan2.1_VAE.pth").unlink()
    proc = vidax(*base, f"model.checkpoint={tmp_path / 'orig'}", cwd=tmp_path)
    err = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(err) == 1 and "Wan2.1_VAE.pth or Wan2.2_VAE.pth" in err[0], proc.stderr

    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.bin").write_bytes(b"x")
    proc = vidax(*base, f"model.checkpoint={other}", cwd=tmp_path)
    err = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(err) == 1, proc.stderr
    assert "not in diffusers layout" in err[0] and "nor in another layout the plugin of" in err[0]
