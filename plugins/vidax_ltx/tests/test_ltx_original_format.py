"""The original LTX-Video single-file layout (DiT + VAE in one .safetensors, config in its metadata) loads to
exactly the parameters of its diffusers twin.

The original file is written from a tiny diffusers pipeline by renaming its state dicts the other way round;
diffusers' own single-file conversion (loaders/single_file_utils.py) must turn that file back into the diffusers
keys, which makes the renaming an independent fixture, not a mirror of vidax's table."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.plugins import get_plugins  # noqa: E402
from vidax_ltx.convert_dit import load_dit  # noqa: E402
from vidax_ltx.dit import LTXDiTConfig  # noqa: E402
from vidax_ltx.original_format import LTX098_VAE_CONFIG, open_original  # noqa: E402
from vidax_core.testing.tiny.ltx import build_tiny_ltx_pipeline, random_ltx_upsampler  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_original")


def original_dit_key(k: str) -> str:
    for new, old in (("proj_in", "patchify_proj"), ("time_embed", "adaln_single"), ("norm_q", "q_norm"),
                     ("norm_k", "k_norm")):
        k = k.replace(new, old)
    return "model.diffusion_model." + k


def original_vae_key(k: str) -> str:
    """diffusers AutoencoderKLLTXVideo key -> the 0.9.5+ original key."""
    side = k.split(".")[0]
    if side == "decoder":
        k = re.sub(r"^decoder\.mid_block\.", "decoder.UP.0.", k)
        k = re.sub(r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", lambda m: f"decoder.UP.{2 * int(m[1]) + 1}.", k)
        k = re.sub(r"^decoder\.up_blocks\.(\d+)\.(?!\d)", lambda m: f"decoder.UP.{2 * int(m[1]) + 2}.", k)
        k = k.replace("decoder.UP.", "decoder.up_blocks.")
        k = re.sub(r"^decoder\.time_embedder\.", "decoder.last_time_embedder.", k)
        k = re.sub(r"^decoder\.scale_shift_table$", "decoder.last_scale_shift_table", k)
    elif side == "encoder":
        k = re.sub(r"^encoder\.mid_block\.", "encoder.DN.8.", k)
        k = re.sub(r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", lambda m: f"encoder.DN.{2 * int(m[1]) + 1}.", k)
        k = re.sub(r"^encoder\.down_blocks\.(\d+)\.(?!\d)", lambda m: f"encoder.DN.{2 * int(m[1])}.", k)
        k = k.replace("encoder.DN.", "encoder.down_blocks.")
    k = (k.replace("resnets", "res_blocks").replace("conv_shortcut.conv", "conv_shortcut")
         .replace("norm3.", "norm3.norm."))
    k = {"latents_mean": "per_channel_statistics.mean-of-means",
         "latents_std": "per_channel_statistics.std-of-means"}.get(k, k)
    return "vae." + k


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """(diffusers folder, original folder, diffusers transformer dict, diffusers vae dict)."""
    from safetensors.numpy import save_file

    root = tmp_path_factory.mktemp("ltx_original")
    pipe = build_tiny_ltx_pipeline("t2v", seed=5)
    diff = root / "diffusers"
    pipe.save_pretrained(str(diff), safe_serialization=True)
    # the one T5 value a ComfyUI T5 file cannot say, at the published T5 v1.1 XXL's (relative-attention distance)
    te = diff / "text_encoder" / "config.json"
    te.write_text(json.dumps({**json.loads(te.read_text()), "relative_attention_max_distance": 128}))
    dit = {k: v.detach().numpy().copy() for k, v in pipe.transformer.state_dict().items()}
    vae = {k: v.detach().numpy().copy() for k, v in pipe.vae.state_dict().items()}
    original = {original_dit_key(k): v for k, v in dit.items()}
    original.update({original_vae_key(k): v for k, v in vae.items()})
    c = vae["latents_mean"].shape[0]
    original["vae.per_channel_statistics.channel"] = np.arange(c, dtype=np.float32)
    original["vae.per_channel_statistics.mean-of-stds"] = np.ones(c, np.float32)
    t = pipe.transformer.config
    config = {
        "transformer": {"_class_name": "Transformer3DModel", "num_attention_heads": t.num_attention_heads,
                        "attention_head_dim": t.attention_head_dim, "num_layers": t.num_layers,
                        "in_channels": t.in_channels, "out_channels": t.out_channels,
                        "cross_attention_dim": t.cross_attention_dim, "caption_channels": t.caption_channels,
                        "qk_norm": "rms_norm", "norm_eps": t.norm_eps, "activation_fn": "gelu-approximate",
                        "attention_bias": True, "positional_embedding_type": "rope",
                        "positional_embedding_max_pos": [20, 2048, 2048], "positional_embedding_theta": 10000.0},
        "vae": {k: v for k, v in dict(pipe.vae.config).items() if not k.startswith("_")}
        | {"_class_name": "AutoencoderKLLTXVideo"},
    }
    orig = root / "original"
    orig.mkdir()
    save_file(original, str(orig / "ltxv-tiny-0.9.8.safetensors"), metadata={"config": json.dumps(config)})
    for part in ("text_encoder", "tokenizer"):
        shutil.copytree(diff / part, orig / part)
    # The spatial upscaler both ways: diffusers' latent_upsampler/ folder, and the original file beside the release
    # file (diffusers' tensor names, its config in the metadata), which the release-file lookup must leave aside.
    up = random_ltx_upsampler(seed=6)
    up.save_pretrained(str(diff / "latent_upsampler"))
    save_file({k: v.detach().numpy().copy() for k, v in up.state_dict().items()},
              str(orig / "ltxv-spatial-upscaler-tiny.safetensors"),
              metadata={"config": json.dumps({k: v for k, v in dict(up.config).items() if not k.startswith("_")})})
    return diff, orig, dit, vae, original


def test_fixture_renaming_is_diffusers_own(twin):
    """diffusers' single-file conversion maps the written original keys back onto the diffusers ones."""
    from diffusers.loaders.single_file_utils import (convert_ltx_transformer_checkpoint_to_diffusers,
                                                     convert_ltx_vae_checkpoint_to_diffusers)

    _, _, dit, vae, original = twin
    back = convert_ltx_transformer_checkpoint_to_diffusers({k: v for k, v in original.items()
                                                            if not k.startswith("vae.")})
    assert set(back) == set(dit)
    src = {k: v for k, v in original.items() if k.startswith("vae.")}
    key = "vae.encoder.conv_out.conv.weight"
    real = src[key]
    src[key] = np.empty((1, 2048, 0), np.float32)  # diffusers picks the 0.9.5+ table from this width
    back = convert_ltx_vae_checkpoint_to_diffusers(src)
    back["encoder.conv_out.conv.weight"] = real
    assert set(back) == set(vae), sorted(set(back) ^ set(vae))[:10]


def test_original_file_answers_in_diffusers_terms(twin):
    _, orig, dit, vae, _ = twin
    spec = get_plugins().registry.get("ltx-video-13b-0.9.8-dev")
    ckpt = get_plugins().call("open_checkpoint", spec, path=str(orig))
    assert ckpt is not None
    t = ckpt.tensors("transformer")
    assert set(t) == set(dit)
    assert all(np.array_equal(np.asarray(t[k]), dit[k]) for k in dit)
    v = ckpt.tensors("vae")
    assert set(v) == set(vae)
    assert all(np.array_equal(np.asarray(v[k]), vae[k]) for k in vae)
    assert ckpt.config("vae")["latent_channels"] == 8
    assert ckpt.config("scheduler")["_class_name"] == "FlowMatchEulerDiscreteScheduler"


def test_loads_exactly_the_params_of_the_diffusers_twin(twin):
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.nn.state import flat_state

    diff, orig, _, _, _ = twin
    a, b = Checkpoint(str(diff)), open_original(None, str(orig))
    cfg_a = LTXDiTConfig.from_config(a.config("transformer"))
    cfg_b = LTXDiTConfig.from_config(b.config("transformer"))
    assert cfg_a == cfg_b
    pa = flat_state(load_dit(cfg_a, a.tensors("transformer")))
    pb = flat_state(load_dit(cfg_b, b.tensors("transformer")))
    assert set(pa) == set(pb)
    assert all(np.array_equal(np.asarray(pa[k]), np.asarray(pb[k])) for k in pa)


def test_refusals(tmp_path, twin):
    from safetensors.numpy import save_file

    _, orig, _, _, _ = twin
    assert open_original(None, str(tmp_path)) is None  # not this layout: declined
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(next(orig.glob("*.safetensors")), half)
    with pytest.raises(UserError, match="lacks text_encoder/, tokenizer/"):
        open_original(None, str(half))
    bad = tmp_path / "bad"
    shutil.copytree(orig, bad)
    f = next(bad.glob("*.safetensors"))
    save_file({"x": np.zeros(1, np.float32)}, str(f), metadata={"config": json.dumps({"transformer": {
        "num_attention_heads": 2, "attention_head_dim": 16, "num_layers": 2,
        "positional_embedding_max_pos": [1, 2, 3]}})})
    with pytest.raises(UserError, match="no VAE"):
        open_original(None, str(bad))


def test_published_vae_config_is_diffusers_constructible():
    from diffusers import AutoencoderKLLTXVideo

    with torch.device("meta"):
        vae = AutoencoderKLLTXVideo(**{k: v for k, v in LTX098_VAE_CONFIG.items() if not k.startswith("_")})
    assert vae.spatial_compression_ratio == 32 and vae.temporal_compression_ratio == 8


def test_run_from_the_original_file_equals_the_diffusers_twin(twin, tmp_path):
    """`vidax run` of the preset's multi-scale recipe from the original folder (release file + upscaler file beside
    it), and from the same files in a ComfyUI models folder, gives the diffusers folder's (latent_upsampler/)
    latents exactly. Both use the plain flow-match Euler the
    0.9.8 repositories ship (the tiny pipeline's scheduler has LTXPipeline's dynamic shift)."""
    from vidax_core.testing.runs import run_many

    diff, orig, _, _, _ = twin
    comfy = _comfy_folder(tmp_path, diff, orig)
    base = ["model.id=ltx-video-13b-0.9.8-dev", "prompt=a red fox", "negative_prompt=blurry", "sampling.num_steps=2",
            "sampling.height=96", "sampling.width=96", "sampling.num_frames=9", "sampling.max_sequence_length=16",
            "parallel.dp=1", "sampling.scheduler={name: flow_euler}", "options.second_pass_steps=2",
            "options.second_pass_denoise_strength=0.5"]
    runs = run_many(base, {"diffusers": (f"model.checkpoint={diff}",), "original": (f"model.checkpoint={orig}",),
                           "comfy": (f"model.checkpoint={comfy}", f"model.files={{tokenizer: {diff / 'tokenizer'}}}")},
                    devices=1)
    for name in ("original", "comfy"):
        assert "error" not in runs[name], runs[name]
        print(f"ltx {name} vs diffusers run: rel {runs[name]['rel']:.1e}")
    assert runs["original"]["rel"] == 0.0
    assert runs["comfy"]["rel"] <= 1e-4


def _comfy_folder(tmp_path, diff, orig):
    """The release file as ComfyUI keeps it: ``checkpoints/``, the upscaler in ``latent_upscale_models/``, the T5
    as one ``text_encoders/`` file in transformers names (its config from the id's published layout and the tensor
    shapes); the tokenizer is named with ``model.files.tokenizer``."""
    from safetensors.numpy import load_file, save_file

    comfy = tmp_path / "ComfyUI"
    for sub in ("checkpoints", "latent_upscale_models", "text_encoders"):
        (comfy / "models" / sub).mkdir(parents=True)
    shutil.copy(orig / "ltxv-tiny-0.9.8.safetensors",
                comfy / "models" / "checkpoints" / "ltxv-13b-0.9.8-dev.safetensors")
    shutil.copy(orig / "ltxv-spatial-upscaler-tiny.safetensors",
                comfy / "models" / "latent_upscale_models" / "ltxv-spatial-upscaler-0.9.8.safetensors")
    t5 = load_file(str(next((diff / "text_encoder").glob("*.safetensors"))))
    save_file(t5, str(comfy / "models" / "text_encoders" / "t5xxl_fp16.safetensors"))
    return comfy

