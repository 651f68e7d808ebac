"""The original HunyuanVideo-1.5 release folder (tencent/HunyuanVideo-1.5 with the encoders its download notes add)
runs to the latents of the diffusers-layout folder it was written from: text-to-video (CFG, byT5 on quoted text)
at the root, the step-distilled image-to-video DiT chosen by its id; a ``transformer/<variant>`` path chooses
that DiT (the CFG-distilled ones); refusals name what is wrong.

The release folder is written here from the tiny diffusers pipeline by the inverse of diffusers'
``scripts/convert_hunyuan_video1_5_to_diffusers.py``: the DiT with the release's names (``to_original`` of the DiT
test), the VAE's ``down.N.block.M`` / ``mid.block_1`` / ``mid.attn_1.q`` names and its ``AutoencoderKLConv3D``
config, Qwen as the full Qwen2.5-VL-7B-Instruct checkpoint (``model.`` prefix, vision tower and LM head beside it,
the composite config), byT5 as google/byt5-small's config and tokenizer plus the Glyph-SDXL-v2 ``byt5_model.pt``
(``module.text_tower.encoder.*`` keys, its vocabulary grown past byt5-small's), SigLIP as FLUX.1-Redux-dev's
``image_encoder/`` and ``feature_extractor/``."""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_hunyuan15_dit import to_original  # noqa: E402

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.testing.reference import write_test_image  # noqa: E402
from vidax_core.testing.runs import run_many  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan15_release")

GLYPH_EXTRA = 6  # color / font tokens the glyph checkpoint adds to byt5-small's 384
# diffusers VAE key prefix -> the release's (the conversion script read backwards)
VAE_TO_ORIGINAL = [
    (r"(encoder|decoder)\.(down|up)_blocks\.(\d+)\.resnets\.(\d+)\.", r"\1.\2.\3.block.\4."),
    (r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", r"encoder.down.\1.downsample."),
    (r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", r"decoder.up.\1.upsample."),
    (r"(encoder|decoder)\.mid_block\.resnets\.0\.", r"\1.mid.block_1."),
    (r"(encoder|decoder)\.mid_block\.resnets\.1\.", r"\1.mid.block_2."),
    (r"(encoder|decoder)\.mid_block\.attentions\.0\.to_(q|k|v)\.", r"\1.mid.attn_1.\2."),
    (r"(encoder|decoder)\.mid_block\.attentions\.0\.", r"\1.mid.attn_1."),
]


def _json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)


def _read(path):
    with open(path) as f:
        return json.load(f)


def write_dit(diffusers_dir, out, variant, **extra):
    from safetensors.numpy import load_file, save_file

    cfg = _read(os.path.join(diffusers_dir, "transformer", "config.json"))
    sd = load_file(os.path.join(diffusers_dir, "transformer", "diffusion_pytorch_model.safetensors"))
    folder = os.path.join(out, "transformer", variant)
    os.makedirs(folder)
    save_file({k: np.ascontiguousarray(v) for k, v in to_original(sd).items()},
              os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    _json(os.path.join(folder, "config.json"), {
        "_class_name": "HunyuanVideo_1_5_DiffusionTransformer", "hidden_size": cfg["num_attention_heads"]
        * cfg["attention_head_dim"], "heads_num": cfg["num_attention_heads"], "mm_double_blocks_depth":
        cfg["num_layers"], "rope_dim_list": cfg["rope_axes_dim"], "rope_theta": cfg["rope_theta"],
        "use_meanflow": cfg["use_meanflow"], "glyph_byT5_v2": True, "ideal_resolution": variant[:4],
        "ideal_task": variant[5:8], **extra})


def vae_to_original(vae: dict) -> dict:
    """A diffusers ``AutoencoderKLHunyuanVideo15`` state dict under the release's names."""
    renamed = {}
    for key, value in vae.items():
        for pattern, repl in VAE_TO_ORIGINAL:
            key, n = re.subn("^" + pattern, repl, key, count=1)
            if n:
                break
        renamed[key.replace(".conv_shortcut.", ".nin_shortcut.")] = value
    return renamed


def write_release(diffusers_dir, out, variant="480p_t2v", *, i2v=False, **dit_extra):
    """The release layout of a tiny diffusers-layout HunyuanVideo-1.5 pipeline folder."""
    from safetensors.numpy import load_file, save_file

    d = lambda *p: os.path.join(diffusers_dir, *p)  # noqa: E731
    o = lambda *p: os.path.join(out, *p)  # noqa: E731
    write_dit(diffusers_dir, out, variant, **dit_extra)
    os.makedirs(o("vae"))
    save_file(vae_to_original(load_file(d("vae", "diffusion_pytorch_model.safetensors"))),
              o("vae", "diffusion_pytorch_model.safetensors"))
    v = _read(d("vae", "config.json"))
    _json(o("vae", "config.json"), {
        "_class_name": "AutoencoderKLConv3D", "ffactor_spatial": v["spatial_compression_ratio"],
        "ffactor_temporal": v["temporal_compression_ratio"], "sample_size": 256, "sample_tsize": 64,
        "shift_factor": None, **{k: v[k] for k in ("in_channels", "out_channels", "latent_channels",
                                                   "block_out_channels", "layers_per_block", "scaling_factor",
                                                   "downsample_match_channel", "upsample_match_channel")}})
    # the release pipeline builds its scheduler from its own shift table: this file's shift is not read
    _json(o("scheduler", "scheduler_config.json"),
          {"_class_name": "FlowMatchDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0, "reverse": True,
           "solver": "euler"})
    # Qwen2.5-VL-7B-Instruct: the composite model's checkpoint and config, tokenizer and chat template inside
    llm = o("text_encoder", "llm")
    shutil.copytree(d("tokenizer"), llm)
    qwen = load_file(d("text_encoder", "model.safetensors"))
    width = qwen["embed_tokens.weight"].shape[1]
    save_file({**{f"model.{k}": v for k, v in qwen.items()}, "lm_head.weight": qwen["embed_tokens.weight"],
               "visual.patch_embed.proj.weight": np.ones((4, width), np.float32)},
              os.path.join(llm, "model.safetensors"))
    text_cfg = {k: v for k, v in _read(d("text_encoder", "config.json")).items() if not k.startswith("_")}
    _json(os.path.join(llm, "config.json"), {"architectures": ["Qwen2_5_VLForConditionalGeneration"],
                                             "model_type": "qwen2_5_vl", "text_config": text_cfg,
                                             "vision_config": {"depth": 1}})
    # byT5: byt5-small's config and tokenizer; the glyph weights in their own .pt with a grown vocabulary
    small = o("text_encoder", "byt5-small")
    shutil.copytree(d("tokenizer_2"), small)
    t5_cfg = _read(d("text_encoder_2", "config.json"))
    _json(os.path.join(small, "config.json"), {**t5_cfg, "architectures": ["T5ForConditionalGeneration"]})
    t5 = load_file(d("text_encoder_2", "model.safetensors"))
    embed = t5.get("encoder.embed_tokens.weight", t5.get("shared.weight"))
    glyph = {"module.text_tower.encoder." + k.removeprefix("encoder."): v for k, v in t5.items()
             if k.startswith("encoder.") and k != "encoder.embed_tokens.weight"}
    grown = np.concatenate([embed, np.full((GLYPH_EXTRA, embed.shape[1]), 7.0, embed.dtype)])
    glyph["module.text_tower.encoder.embed_tokens.weight"] = grown
    os.makedirs(o("text_encoder", "Glyph-SDXL-v2", "checkpoints"))
    torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in glyph.items()},
               o("text_encoder", "Glyph-SDXL-v2", "checkpoints", "byt5_model.pt"))
    if i2v:
        for part in ("image_encoder", "feature_extractor"):
            shutil.copytree(d(part), o("vision_encoder", "siglip", part))
    return out


@pytest.fixture(scope="module")
def t2v(tmp_path_factory):
    from vidax_hunyuan.hunyuan15_tiny import one_thread, save_tiny_hunyuan15

    root = tmp_path_factory.mktemp("h15rel")
    with one_thread():
        save_tiny_hunyuan15(root / "diffusers", seed=3)
    write_release(str(root / "diffusers"), str(root / "release"))
    return root


def _plugins():
    from vidax_core.plugins import Plugins

    p = Plugins()
    p.load_entry_points()
    return p


def _open(model_id, path):
    from vidax_core.io.checkpoint import resolve_checkpoint

    p = _plugins()
    spec = p.registry.get(model_id)
    return resolve_checkpoint(str(path), open_folder=lambda q: p.call("open_checkpoint", spec, path=q))


def test_release_reads_as_its_diffusers_twin(t2v):
    """Every component's config and tensor equals the diffusers folder's (what the run then reads)."""
    from vidax_core.io.checkpoint import Checkpoint

    rel, ref = _open("hunyuanvideo-1.5-t2v-480p", t2v / "release"), Checkpoint(str(t2v / "diffusers"))
    assert type(rel).__name__ == "Release15Checkpoint" and rel.path("transformer").endswith("480p_t2v")
    assert rel.config("scheduler")["shift"] == 5.0 and not rel.has("guider")
    dit, want = rel.config("transformer"), ref.config("transformer")
    assert {k: dit[k] for k in dit if not k.startswith("_")} == {k: want[k] for k in dit if not k.startswith("_")}
    assert rel.config("text_encoder_2")["vocab_size"] == ref.config("text_encoder_2")["vocab_size"] + GLYPH_EXTRA
    for component in ("transformer", "vae"):
        got, exp = rel.tensors(component), ref.tensors(component)
        assert set(got) == set(exp), component
        for k in exp:
            np.testing.assert_array_equal(np.asarray(got[k]() if callable(got[k]) else got[k]), exp[k], err_msg=k)
    got = rel.tensors("text_encoder_2")
    embed = ref.tensors("text_encoder_2")["shared.weight"]
    np.testing.assert_array_equal(got["encoder.embed_tokens.weight"][:384], embed)


def test_release_runs_to_the_diffusers_latents(t2v):
    """``vidax run`` on the release root (the id's ``480p_t2v`` DiT) gives the diffusers folder's latents: CFG 6,
    a quoted prompt through the glyph byT5, 2 steps."""
    base = ["model.id=hunyuanvideo-1.5-t2v-480p", 'prompt=a neon sign that reads "OPEN" glows in the rain',
            "negative_prompt=blurry", "sampling.num_steps=2", "sampling.height=32", "sampling.width=48",
            "sampling.num_frames=5", "sampling.max_sequence_length=24", "options.tokenizer_2_max_length=16"]
    runs = run_many(base, {"diffusers": [f"model.checkpoint={t2v / 'diffusers'}"],
                           "release": [f"model.checkpoint={t2v / 'release'}"]}, devices=1)
    print("release vs diffusers latents rel", runs["release"].get("rel", runs["release"]))
    assert runs["release"]["rel"] == 0.0, runs["release"]


def test_step_distilled_release_runs_to_the_diffusers_latents(tmp_path):
    """The step-distilled id takes ``transformer/480p_i2v_step_distilled`` of the root, with the release's flow
    shift 7, the SigLIP tower from ``vision_encoder/siglip``; same latents as the diffusers folder (its scheduler
    set to shift 7)."""
    from vidax_hunyuan.hunyuan15_tiny import one_thread, save_tiny_hunyuan15_i2v

    with one_thread():
        save_tiny_hunyuan15_i2v(tmp_path / "diffusers", seed=3, dit={"use_meanflow": True},
                                guider={"guidance_scale": 1.0})
    sched = tmp_path / "diffusers" / "scheduler" / "scheduler_config.json"
    _json(str(sched), {**_read(sched), "shift": 7.0})
    write_release(str(tmp_path / "diffusers"), str(tmp_path / "release"), "480p_i2v_step_distilled", i2v=True,
                  target_size=48)
    write_test_image(tmp_path / "in.png", size=(30, 50))
    base = ["model.id=hunyuanvideo-1.5-i2v-480p-step-distilled", "prompt=a red fox", f"image={tmp_path / 'in.png'}",
            "sampling.num_steps=2", "sampling.height=32", "sampling.width=48", "sampling.num_frames=5",
            "sampling.max_sequence_length=24", "options.tokenizer_2_max_length=16"]
    runs = run_many(base, {"diffusers": [f"model.checkpoint={tmp_path / 'diffusers'}"],
                           "release": [f"model.checkpoint={tmp_path / 'release'}"]}, devices=1)
    print("step-distilled release vs diffusers latents rel", runs["release"].get("rel", runs["release"]))
    assert runs["release"]["rel"] == 0.0, runs["release"]


def test_dit_folder_path_chooses_that_dit(t2v, tmp_path):
    """``model.checkpoint=<root>/transformer/480p_t2v_distilled`` reads that DiT with the root's other parts; a
    DiT the id does not run, a root without the id's DiT, a missing encoder folder are refused in one line."""
    from vidax_hunyuan.hunyuan15_tiny import one_thread, save_tiny_hunyuan15

    root = tmp_path / "release"
    shutil.copytree(t2v / "release", root)
    with one_thread():
        save_tiny_hunyuan15(tmp_path / "other", seed=11)
    write_dit(str(tmp_path / "other"), str(root), "480p_t2v_distilled")
    ckpt = _open("hunyuanvideo-1.5-t2v-480p", root / "transformer" / "480p_t2v_distilled")
    assert ckpt.root == str(root) and ckpt.path("vae") == str(root / "vae")
    key = "transformer_blocks.0.attn.to_q.weight"
    from safetensors.numpy import load_file

    want = load_file(tmp_path / "other" / "transformer" / "diffusion_pytorch_model.safetensors")[key]
    np.testing.assert_array_equal(ckpt.tensors("transformer")[key](), want)
    assert not np.array_equal(_open("hunyuanvideo-1.5-t2v-480p", root).tensors("transformer")[key](), want)
    with pytest.raises(UserError, match=r"transformer/480p_t2v_distilled/ is not a DiT hunyuanvideo-1.5-i2v-480p"):
        _open("hunyuanvideo-1.5-i2v-480p", root / "transformer" / "480p_t2v_distilled")
    with pytest.raises(UserError, match=r"no transformer/720p_t2v/ .*it has 480p_t2v, 480p_t2v_distilled"):
        _open("hunyuanvideo-1.5-t2v-720p", root)
    with pytest.raises(UserError, match=r"no vision_encoder/siglip: add it from black-forest-labs/FLUX.1-Redux-dev"):
        shutil.copytree(root / "transformer" / "480p_t2v", root / "transformer" / "480p_i2v")
        _open("hunyuanvideo-1.5-i2v-480p", root)
    shutil.rmtree(root / "text_encoder" / "Glyph-SDXL-v2")
    with pytest.raises(UserError, match=r"no text_encoder/Glyph-SDXL-v2/checkpoints/byt5_model.pt"):
        _open("hunyuanvideo-1.5-t2v-480p", root)


def test_a_single_dit_file_reads_as_its_diffusers_twin(t2v):
    """The release's DiT as one file (ComfyUI's ``diffusion_models/``, here named with ``model.files`` over the
    diffusers folder, which gives the rest): its config from the shapes, the id's ``480p_t2v`` and the base's
    RoPE / target size equals the twin's, and so does every tensor (the family's ``component_file`` hook)."""
    import json

    from vidax_core.api import resolve_config
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.io.run_checkpoint import checkpoint_for_run

    p = _plugins()
    dit = t2v / "release" / "transformer" / "480p_t2v" / "diffusion_pytorch_model.safetensors"
    cfg = resolve_config("hunyuanvideo-1.5-t2v-480p", [f"model.checkpoint={t2v / 'diffusers'}",
                                                       f"model.files={json.dumps({'transformer': str(dit)})}"], p)
    ckpt = checkpoint_for_run(cfg, p.registry.get(cfg.model.id), p)
    ref = Checkpoint(str(t2v / "diffusers"))
    got, want = ckpt.config("transformer"), ref.config("transformer")
    assert {k: v for k, v in got.items() if not k.startswith("_")} == {k: v for k, v in want.items()
                                                                         if not k.startswith("_")}
    tensors, expected = ckpt.tensors("transformer"), ref.tensors("transformer")
    assert set(tensors) == set(expected)
    for k in expected:
        value = tensors[k]
        np.testing.assert_array_equal(np.asarray(value() if callable(value) else value), expected[k], err_msg=k)
    assert ckpt.path("vae") == ref.path("vae")  # the rest from the base folder
