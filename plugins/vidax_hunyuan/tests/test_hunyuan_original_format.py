"""The original HunyuanVideo release layout (tencent ``mp_rank_00_model_states.pt``: DeepSpeed ``{"module": ...}``,
fused qkv / linear1, final AdaLN as (shift, scale)) read pickle-free loads exactly the parameters of its diffusers
twin; the release folder (``.pt`` DiT and VAE, text encoder folders) runs like the diffusers folder it came from.

The original-layout fixture is written here from the diffusers model by the inverse of the mapping the issue
describes (and diffusers' single-file converter implements): q, k, v stacked on the output axis; a single block's
linear1 = [q; k; v; mlp_in]; final AdaLN halves swapped."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from flax import nnx  # noqa: E402

from vidax_core.nn.state import abstract_model, flat_state  # noqa: E402
from vidax_hunyuan.convert_dit import convert_dit, load_dit  # noqa: E402
from vidax_hunyuan.dit import HunyuanDiT, HunyuanDiTConfig  # noqa: E402
from vidax_hunyuan.original_format import OriginalDiT, dit_config  # noqa: E402
from vidax_core.testing.tiny.hunyuan import TINY_DIT, save_tiny_hunyuan  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan_original")

INVERSE = [  # diffusers infix -> original infix, first match wins (per-key renames; fused ones below)
    ("context_embedder.time_text_embed.timestep_embedder.linear_1.", "txt_in.t_embedder.mlp.0."),
    ("context_embedder.time_text_embed.timestep_embedder.linear_2.", "txt_in.t_embedder.mlp.2."),
    ("context_embedder.time_text_embed.text_embedder.", "txt_in.c_embedder."),
    ("x_embedder.proj.", "img_in.proj."),
    ("time_text_embed.timestep_embedder.linear_1.", "time_in.mlp.0."),
    ("time_text_embed.timestep_embedder.linear_2.", "time_in.mlp.2."),
    ("time_text_embed.guidance_embedder.linear_1.", "guidance_in.mlp.0."),
    ("time_text_embed.guidance_embedder.linear_2.", "guidance_in.mlp.2."),
    ("time_text_embed.text_embedder.linear_1.", "vector_in.in_layer."),
    ("time_text_embed.text_embedder.linear_2.", "vector_in.out_layer."),
    ("context_embedder.proj_in.", "txt_in.input_embedder."),
    ("context_embedder.token_refiner.refiner_blocks.", "txt_in.individual_token_refiner.blocks."),
    ("transformer_blocks.", "double_blocks."),
    ("single_transformer_blocks.", "single_blocks."),
    ("attn.to_out.0.", "self_attn_proj."),  # refiner (double blocks handled first)
    ("ff.net.0.proj.", "mlp.fc1."), ("ff.net.2.", "mlp.fc2."), ("norm_out.linear.", "adaLN_modulation.1."),
]
DOUBLE = {"norm1.linear": "img_mod.linear", "attn.norm_q": "img_attn_q_norm", "attn.norm_k": "img_attn_k_norm",
          "attn.to_out.0": "img_attn_proj", "ff.net.0.proj": "img_mlp.fc1", "ff.net.2": "img_mlp.fc2",
          "norm1_context.linear": "txt_mod.linear", "attn.norm_added_q": "txt_attn_q_norm",
          "attn.norm_added_k": "txt_attn_k_norm", "attn.to_add_out": "txt_attn_proj",
          "ff_context.net.0.proj": "txt_mlp.fc1", "ff_context.net.2": "txt_mlp.fc2"}
SINGLE = {"proj_out": "linear2", "attn.norm_q": "q_norm", "attn.norm_k": "k_norm", "norm.linear": "modulation.linear"}


def to_original(sd: dict) -> dict:
    """A diffusers HunyuanVideoTransformer3DModel state dict -> the original release's keys and fused tensors."""
    sd, out = dict(sd), {}
    for kind in ("weight", "bias"):
        out[f"final_layer.adaLN_modulation.1.{kind}"] = np.concatenate(
            np.split(sd.pop(f"norm_out.linear.{kind}"), 2)[::-1])
        out[f"final_layer.linear.{kind}"] = sd.pop(f"proj_out.{kind}")
    blocks = {k.split(".")[1] for k in sd if k.startswith("transformer_blocks.")}
    for b in sorted(blocks):
        pre, opre = f"transformer_blocks.{b}.", f"double_blocks.{b}."
        for kind in ("weight", "bias"):
            out[f"{opre}img_attn_qkv.{kind}"] = np.concatenate([sd.pop(f"{pre}attn.to_{p}.{kind}") for p in "qkv"])
            out[f"{opre}txt_attn_qkv.{kind}"] = np.concatenate([sd.pop(f"{pre}attn.add_{p}_proj.{kind}")
                                                                for p in "qkv"])
        for k in [k for k in sd if k.startswith(pre)]:
            mid, kind = k[len(pre):].rsplit(".", 1)
            out[f"{opre}{DOUBLE[mid]}.{kind}"] = sd.pop(k)
    singles = {k.split(".")[1] for k in sd if k.startswith("single_transformer_blocks.")}
    for b in sorted(singles):
        pre, opre = f"single_transformer_blocks.{b}.", f"single_blocks.{b}."
        for kind in ("weight", "bias"):
            out[f"{opre}linear1.{kind}"] = np.concatenate(
                [sd.pop(f"{pre}attn.to_{p}.{kind}") for p in "qkv"] + [sd.pop(f"{pre}proj_mlp.{kind}")])
        for k in [k for k in sd if k.startswith(pre)]:
            mid, kind = k[len(pre):].rsplit(".", 1)
            out[f"{opre}{SINGLE[mid]}.{kind}"] = sd.pop(k)
    refiner = "context_embedder.token_refiner.refiner_blocks."
    for b in sorted({k[len(refiner):].split(".")[0] for k in sd if k.startswith(refiner)}):
        pre = f"{refiner}{b}."
        for kind in ("weight", "bias"):
            out[f"txt_in.individual_token_refiner.blocks.{b}.self_attn_qkv.{kind}"] = np.concatenate(
                [sd.pop(f"{pre}attn.to_{p}.{kind}") for p in "qkv"])
    for k in list(sd):
        new = k
        for a, o in INVERSE:
            if a in new:
                new = new.replace(a, o)
                if a.startswith("context_embedder.time_text_embed"):
                    break
        out[new] = sd.pop(k)
    return out


def save_original(folder, sd):
    os.makedirs(os.path.join(folder, "transformers"), exist_ok=True)
    torch.save({"module": {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in to_original(sd).items()}},
               os.path.join(folder, "transformers", "mp_rank_00_model_states.pt"))


@pytest.fixture(scope="module")
def diffusers_dit():
    from diffusers import HunyuanVideoTransformer3DModel

    from vidax_core.testing.reference import randomize_

    model = HunyuanVideoTransformer3DModel(**TINY_DIT).eval().float()
    randomize_(model, 5, 0.2)
    return {k: v.numpy() for k, v in model.state_dict().items()}


def test_original_pt_loads_exactly_the_diffusers_params(tmp_path, diffusers_dit):
    from vidax_core.io.pth import PthFile

    save_original(tmp_path, diffusers_dit)
    orig = OriginalDiT(PthFile(tmp_path / "transformers" / "mp_rank_00_model_states.pt"))
    cfg_dict = dit_config(orig, {"rope_axes_dim": list(TINY_DIT["rope_axes_dim"])})
    cfg = HunyuanDiTConfig.from_config(cfg_dict)
    assert cfg == HunyuanDiTConfig.from_config(TINY_DIT)
    want = flat_state(load_dit(cfg, diffusers_dit))
    _, _, flat = abstract_model(lambda: HunyuanDiT(cfg, rngs=nnx.Rngs(0)))
    got = convert_dit(orig, flat)
    assert set(got) == set(want)
    for path, value in got.items():
        np.testing.assert_array_equal(value, np.asarray(want[path]), err_msg=str(path))


def test_swapped_adaln_is_seen(tmp_path, diffusers_dit):
    """The (shift, scale) swap matters: without it the head's parameters differ."""
    from vidax_core.io.pth import PthFile

    save_original(tmp_path, diffusers_dit)
    orig = OriginalDiT(PthFile(tmp_path / "transformers" / "mp_rank_00_model_states.pt"))
    raw = np.asarray(PthFile(tmp_path / "transformers" / "mp_rank_00_model_states.pt")
                     ["final_layer.adaLN_modulation.1.weight"])
    assert not np.array_equal(orig["norm_out.linear.weight"](), raw)
    np.testing.assert_array_equal(orig["norm_out.linear.weight"](), diffusers_dit["norm_out.linear.weight"])
    assert orig.shape("single_transformer_blocks.0.proj_mlp.weight") == diffusers_dit[
        "single_transformer_blocks.0.proj_mlp.weight"].shape


def make_release_folder(diffusers_dir, out):
    """The release layout of a diffusers-layout tiny checkpoint: ``.pt`` DiT and VAE, text encoder folders with
    their tokenizers inside (the tiny DiT's RoPE axes go into an optional transformers/config.json)."""
    import json

    from safetensors.numpy import load_file

    model = os.path.join(out, "hunyuan-video-t2v-720p")
    sd = load_file(os.path.join(diffusers_dir, "transformer", "diffusion_pytorch_model.safetensors"))
    save_original(model, sd)
    with open(os.path.join(model, "transformers", "config.json"), "w") as f:
        json.dump({"rope_axes_dim": list(TINY_DIT["rope_axes_dim"])}, f)
    os.makedirs(os.path.join(model, "vae"))
    vae = load_file(os.path.join(diffusers_dir, "vae", "diffusion_pytorch_model.safetensors"))
    torch.save({k: torch.from_numpy(v) for k, v in vae.items()}, os.path.join(model, "vae", "pytorch_model.pt"))
    with open(os.path.join(diffusers_dir, "vae", "config.json")) as f:
        vcfg = json.load(f)
    vcfg = {"_class_name": "AutoencoderKLCausal3D", "time_compression_ratio": vcfg.pop("temporal_compression_ratio"),
            **{k: v for k, v in vcfg.items() if not k.startswith("_") and k != "spatial_compression_ratio"}}
    with open(os.path.join(model, "vae", "config.json"), "w") as f:
        json.dump(vcfg, f)
    for enc, tok in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        shutil.copytree(os.path.join(diffusers_dir, enc), os.path.join(out, enc))
        for name in os.listdir(os.path.join(diffusers_dir, tok)):
            shutil.copy(os.path.join(diffusers_dir, tok, name), os.path.join(out, enc, name))


def test_release_folder_runs_like_its_diffusers_twin(tmp_path):
    from vidax_core.testing.cli import vidax

    save_tiny_hunyuan(tmp_path / "diffusers", seed=3)
    make_release_folder(str(tmp_path / "diffusers"), str(tmp_path / "release"))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "noise.npy", rng.standard_normal((1, 4, 3, 4, 4)).astype(np.float32))
    outs = {}
    for name in ("diffusers", "release"):
        proc = vidax("run", "model.id=hunyuanvideo-t2v-13b", f"model.checkpoint={tmp_path / name}",
                     "prompt=a red fox runs in the snow", "sampling.num_steps=2", "sampling.height=32",
                     "sampling.width=32", "sampling.num_frames=9", "sampling.max_sequence_length=300",
                     f"sampling.initial_noise={tmp_path / 'noise.npy'}", f"output.path={tmp_path / name}.mp4",
                     f"output.save_latents={tmp_path / name}_lat.npy",
                     f"output.save_frames={tmp_path / name}_frames.npy", "--quiet", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outs[name] = (np.load(tmp_path / f"{name}_lat.npy"), np.load(tmp_path / f"{name}_frames.npy"))
    np.testing.assert_array_equal(outs["release"][0], outs["diffusers"][0])
    np.testing.assert_array_equal(outs["release"][1], outs["diffusers"][1])
