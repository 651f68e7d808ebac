"""Original Wan-AI checkpoint layout: a tiny model written with original key names loads to exactly the same params
as its diffusers-layout twin (DiT, Wan 2.1 VAE, Wan 2.2 VAE, UMT5).

The inverse maps below are written independently from the forward tables in ``original_format``: they spell the
original names as ``wan/modules/{model,vae,vae2_2,t5}.py`` define them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from vidax_core.io.convert import ConversionError
from vidax_core.nn.state import flat_state
from vidax_core.testing.tiny.wan_original_keys import DIT_INV as _DIT_INV, T5_INV as _T5_INV
from vidax_core.testing.tiny.wan_original_keys import inverse as _inverse, vae_inverse as _vae_inverse
from vidax_wan import original_format as of

ASSETS = Path(__file__).resolve().parents[1] / "src" / "vidax_wan" / "assets" / "tiny-random"




def _assert_same_params(a, b) -> None:
    fa, fb = flat_state(a), flat_state(b)
    assert fa.keys() == fb.keys()
    for path in fa:
        np.testing.assert_array_equal(np.asarray(fa[path]), np.asarray(fb[path]), err_msg=str(path))


def _json(path: Path) -> dict:
    import json

    return json.loads(path.read_text())


def test_dit_original_layout_loads_identically():
    from vidax_wan.convert_dit import load_dit
    from vidax_wan.dit import WanDiTConfig

    cfg = WanDiTConfig.from_config(_json(ASSETS / "transformer" / "config.json"))
    tensors = load_file(str(ASSETS / "transformer" / "diffusion_pytorch_model.safetensors"))
    original = {_inverse(k, _DIT_INV): v for k, v in tensors.items()}
    assert len(original) == len(tensors)
    assert {"patch_embedding.weight", "text_embedding.0.weight", "time_embedding.2.bias", "time_projection.1.weight",
            "blocks.0.self_attn.q.weight", "blocks.1.cross_attn.o.bias", "blocks.0.self_attn.norm_k.weight",
            "blocks.0.norm3.weight", "blocks.0.ffn.0.weight", "blocks.0.modulation", "head.head.weight",
            "head.modulation"} <= set(original)
    assert all(of.dit_key(o) == k for k, o in zip(tensors, original))
    _assert_same_params(of.load_dit_original(cfg, original), load_dit(cfg, tensors))


def test_dit_i2v_keys_round_trip():
    """I2V / FLF2V extras (image embedder, image key/value projections) map back to the diffusers names."""
    torch = pytest.importorskip("torch")
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    ref = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8, in_channels=8,
                                out_channels=4, text_dim=16, freq_dim=16, ffn_dim=16, num_layers=1,
                                image_dim=12, added_kv_proj_dim=16, pos_embed_seq_len=2 * 257)
    keys = list(ref.state_dict())
    inv = {_inverse(k, _DIT_INV): k for k in keys}
    assert {"blocks.0.cross_attn.k_img.weight", "blocks.0.cross_attn.norm_k_img.weight", "img_emb.proj.1.weight",
            "img_emb.proj.4.bias", "img_emb.emb_pos"} <= set(inv)
    assert all(of.dit_key(o) == k for o, k in inv.items())


@pytest.mark.parametrize("wan22", [False, True])
def test_vae_original_layout_loads_identically(wan22):
    if wan22:
        torch = pytest.importorskip("torch")
        from diffusers import AutoencoderKLWan

        from vidax_core.vae.convert_wan22 import load_vae22 as load

        torch.manual_seed(0)
        ref = AutoencoderKLWan(base_dim=8, decoder_base_dim=12, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=2,
                               temperal_downsample=[False, True, True], is_residual=True, patch_size=2,
                               in_channels=12, out_channels=12, latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
        config = dict(ref.config)
        tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    else:
        from vidax_core.vae.convert_wan21 import load_vae as load

        config = _json(ASSETS / "vae" / "config.json")  # num_res_blocks=1: the flat decoder index is not R=2's
        tensors = load_file(str(ASSETS / "vae" / "diffusion_pytorch_model.safetensors"))
    from vidax_core.vae.wan21 import WanVAEConfig

    cfg = WanVAEConfig.from_config(config)
    original = {_vae_inverse(k, cfg.num_res_blocks, wan22): v for k, v in tensors.items()}
    assert len(original) == len(tensors)
    expected = {"conv1.weight", "conv2.bias", "encoder.conv1.weight", "decoder.head.0.gamma",
                "encoder.middle.2.residual.6.weight", "decoder.middle.1.to_qkv.weight"}
    expected |= ({"encoder.downsamples.0.downsamples.2.resample.1.weight",
                  "decoder.upsamples.0.upsamples.3.time_conv.bias",
                  "decoder.upsamples.3.upsamples.2.residual.3.gamma"} if wan22 else
                 {"encoder.downsamples.1.resample.1.weight", "decoder.upsamples.2.resample.1.weight",
                  "decoder.upsamples.3.residual.0.gamma"})
    assert expected <= set(original), expected - set(original)
    _assert_same_params(of.load_vae_original(cfg, original), load(cfg, tensors))


def test_umt5_original_layout_loads_identically():
    from vidax_core.encoders.t5 import T5Config as UMT5Config, load_t5 as load_umt5

    cfg = UMT5Config.from_config(_json(ASSETS / "text_encoder" / "config.json"))
    tensors = load_file(str(ASSETS / "text_encoder" / "model.safetensors"))
    tensors = {k: v for k, v in tensors.items() if not k.startswith("decoder.") and k != "lm_head.weight"}
    tensors.pop("encoder.embed_tokens.weight", None)  # tied with shared.weight
    original = {_inverse(k, _T5_INV): v for k, v in tensors.items()}
    assert {"token_embedding.weight", "blocks.1.attn.o.weight", "blocks.0.pos_embedding.embedding.weight",
            "blocks.1.ffn.gate.0.weight", "blocks.0.ffn.fc1.weight", "blocks.0.ffn.fc2.weight",
            "blocks.0.norm2.weight", "norm.weight"} <= set(original)
    _assert_same_params(of.load_umt5_original(cfg, original), load_umt5(cfg, tensors))


def test_errors_name_original_keys():
    from vidax_wan.dit import WanDiTConfig

    cfg = WanDiTConfig.from_config(_json(ASSETS / "transformer" / "config.json"))
    tensors = load_file(str(ASSETS / "transformer" / "diffusion_pytorch_model.safetensors"))
    original = {_inverse(k, _DIT_INV): v for k, v in tensors.items()}
    del original["blocks.1.self_attn.q.weight"]
    original["blocks.0.mystery.weight"] = np.zeros(2, np.float32)
    original["head.head.bias"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError) as err:
        of.load_dit_original(cfg, original)
    assert err.value.unexpected == ["blocks.0.mystery.weight"]
    assert err.value.mismatched[0].startswith("head.head.bias (3,)")
    assert err.value.missing == ["blocks/attn1/to_q/kernel layers [1]"]
    assert "original Wan format" in str(err.value)


def test_pth_file_round_trip(tmp_path):
    """An original-layout VAE written with torch.save is read back by vidax_core.io.pth (no pickle code) and loads."""
    torch = pytest.importorskip("torch")
    pth = pytest.importorskip("vidax_core.io.pth")
    from vidax_core.vae.convert_wan21 import load_vae
    from vidax_core.vae.wan21 import WanVAEConfig

    cfg = WanVAEConfig.from_config(_json(ASSETS / "vae" / "config.json"))
    tensors = load_file(str(ASSETS / "vae" / "diffusion_pytorch_model.safetensors"))
    original = {_vae_inverse(k, cfg.num_res_blocks, False): torch.from_numpy(v.copy()) for k, v in tensors.items()}
    torch.save(original, tmp_path / "Wan2.1_VAE.pth")
    loaded = pth.load_pth(tmp_path / "Wan2.1_VAE.pth")
    _assert_same_params(of.load_vae_original(cfg, loaded), load_vae(cfg, tensors))


# --------------------------------------------------------------------------------------------------------------
# Wan2.1 I2V CLIP image encoder (models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth)

CLIP_TINY = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, image_size=28,
                 patch_size=7, hidden_act="gelu", layer_norm_eps=1e-5)

#: transformers ``CLIPVisionModel`` key -> ``wan/modules/clip.py`` ``XLMRobertaCLIP`` key (the inverse of the
#: loader's map, written out independently); q/k/v are fused into ``attn.to_qkv`` by :func:`_clip_to_original`.
_CLIP_INV = [
    (r"vision_model\.embeddings\.patch_embedding\.weight", "visual.patch_embedding.weight"),
    (r"vision_model\.embeddings\.class_embedding", "visual.cls_embedding"),
    (r"vision_model\.embeddings\.position_embedding\.weight", "visual.pos_embedding"),
    (r"vision_model\.pre_layrnorm\.(weight|bias)", r"visual.pre_norm.\1"),
    (r"vision_model\.post_layernorm\.(weight|bias)", r"visual.post_norm.\1"),
    (r"vision_model\.encoder\.layers\.(\d+)\.layer_norm1\.(.*)", r"visual.transformer.\1.norm1.\2"),
    (r"vision_model\.encoder\.layers\.(\d+)\.layer_norm2\.(.*)", r"visual.transformer.\1.norm2.\2"),
    (r"vision_model\.encoder\.layers\.(\d+)\.self_attn\.out_proj\.(.*)", r"visual.transformer.\1.attn.proj.\2"),
    (r"vision_model\.encoder\.layers\.(\d+)\.mlp\.fc1\.(.*)", r"visual.transformer.\1.mlp.0.\2"),
    (r"vision_model\.encoder\.layers\.(\d+)\.mlp\.fc2\.(.*)", r"visual.transformer.\1.mlp.2.\2"),
]


def _tiny_clip_tensors() -> dict[str, np.ndarray]:
    """A random tiny transformers CLIPVisionModel's state dict (``vision_model.`` keys), every parameter random."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    ref = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(**CLIP_TINY)).eval()
    with torch.no_grad():
        for _, p in ref.named_parameters():
            p.copy_(torch.randn_like(p))
    return {("vision_model." + k if not k.startswith("vision_model.") else k): v.numpy().copy()
            for k, v in ref.state_dict().items() if not k.endswith("position_ids")}


def _clip_to_original(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The Wan original layout: renamed, q/k/v fused row-wise into ``to_qkv``, cls (1, 1, D), pos (1, L, D), plus
    the text tower / logit scale / visual head that the loader must drop."""
    out: dict[str, np.ndarray] = {}
    layers = {int(m[1]) for k in tensors if (m := re.match(r"vision_model\.encoder\.layers\.(\d+)\.", k))}
    for n in layers:
        pre = f"vision_model.encoder.layers.{n}.self_attn."
        for kind in ("weight", "bias"):
            out[f"visual.transformer.{n}.attn.to_qkv.{kind}"] = np.concatenate(
                [tensors[f"{pre}{p}_proj.{kind}"] for p in "qkv"], axis=0)
    for key, value in tensors.items():
        if re.search(r"self_attn\.[qkv]_proj\.", key):
            continue
        new = _inverse(key, _CLIP_INV)
        assert new != key, key
        out[new] = value.reshape((1, 1, -1) if new == "visual.cls_embedding" else
                                 (1, *value.shape) if new == "visual.pos_embedding" else value.shape)
    d = tensors["vision_model.embeddings.class_embedding"].shape[0]
    rng = np.random.default_rng(0)
    out["visual.head"] = rng.standard_normal((d, 16)).astype(np.float32)
    out["textual.token_embedding.weight"] = rng.standard_normal((11, 8)).astype(np.float32)
    out["textual.blocks.0.attn.q.weight"] = rng.standard_normal((8, 8)).astype(np.float32)
    out["log_scale"] = np.asarray(2.5, np.float32)
    return out


def test_clip_original_layout_loads_identically(tmp_path):
    torch = pytest.importorskip("torch")
    pth = pytest.importorskip("vidax_core.io.pth")
    from vidax_core.encoders.clip_vision import CLIPVisionConfig, load_clip_vision

    tensors = _tiny_clip_tensors()
    original = _clip_to_original(tensors)
    assert "visual.transformer.0.attn.to_qkv.weight" in original
    assert original["visual.pos_embedding"].shape == (1, 17, 32)
    torch.save({k: torch.from_numpy(v) for k, v in original.items()}, tmp_path / of.CLIP_FILE)
    src = pth.PthFile(tmp_path / of.CLIP_FILE)
    renamed = of.ClipVisionTensors(src)
    assert set(renamed) == set(tensors)  # text tower, log_scale and visual.head dropped; q/k/v split
    for key, value in tensors.items():
        np.testing.assert_array_equal(np.asarray(renamed[key]), value, err_msg=key)

    cfg_dict = of.clip_vision_config_from_tensors(src)
    assert {k: cfg_dict[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
                                     "image_size", "hidden_act", "layer_norm_eps")} == {
        k: CLIP_TINY[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
                                  "image_size", "hidden_act", "layer_norm_eps")}
    cfg = CLIPVisionConfig.from_config({**cfg_dict, "num_attention_heads": CLIP_TINY["num_attention_heads"]})
    _assert_same_params(load_clip_vision(cfg, renamed), load_clip_vision(cfg, tensors))

    # the published file's numbers: ViT-H/14 with 16 heads of 80
    full = of.WAN21_CLIP_VISION_CONFIG
    assert (full["hidden_size"], full["num_attention_heads"], full["hidden_size"] // of.CLIP_HEAD_DIM) == (1280, 16, 16)

    # an unknown visual key is reported by its original name, not silently dropped
    torch.save({**{k: torch.from_numpy(v) for k, v in original.items()}, "visual.extra": torch.zeros(3)},
               tmp_path / "bad.pth")
    with pytest.raises(ConversionError) as err:
        load_clip_vision(cfg, of.ClipVisionTensors(pth.PthFile(tmp_path / "bad.pth")))
    assert "visual.extra" in str(err.value.unexpected)


def test_clip_in_original_folder(tmp_path):
    """An original folder with an I2V DiT (``img_emb.*``) needs the CLIP .pth, and serves it in transformers terms."""
    torch = pytest.importorskip("torch")
    import json

    from safetensors.numpy import save_file
    from test_wan_original_run import write_original
    from vidax_core.encoders.clip_vision import CLIPVisionConfig, load_clip_vision
    from vidax_core.errors import UserError

    root = tmp_path / "orig"
    write_original(root)
    save_file({"img_emb.proj.0.weight": np.ones(8, np.float32)}, str(root / "img.safetensors"))
    index = root / "diffusion_pytorch_model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["img_emb.proj.0.weight"] = "img.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(UserError, match=re.escape(of.CLIP_FILE)):
        of.OriginalWanCheckpoint(str(root))

    tensors = _tiny_clip_tensors()
    torch.save({k: torch.from_numpy(v) for k, v in _clip_to_original(tensors).items()}, root / of.CLIP_FILE)
    ckpt = of.OriginalWanCheckpoint(str(root))
    assert ckpt.has("image_encoder") and ckpt.has("image_processor")
    proc = ckpt.config("image_processor")
    assert proc["image_mean"] == [0.48145466, 0.4578275, 0.40821073] and proc["crop_size"]["height"] == 224
    cfg = CLIPVisionConfig.from_config(ckpt.config("image_encoder"))
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.image_size, cfg.hidden_act) == (32, 3, 28, "gelu")
    _assert_same_params(load_clip_vision(cfg, ckpt.tensors("image_encoder")), load_clip_vision(cfg, tensors))
