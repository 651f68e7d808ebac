"""Full-size architecture check without weights: the published HunyuanVideo 1.0 DiT (hunyuanvideo-community/
HunyuanVideo transformer/config.json: 20 double + 40 single blocks of 24 x 128), its Llama-3-8B text encoder and
CLIP-L text are built by the PyTorch reference on the meta device; their key -> shape lists must be exactly what
vidax's tables expect from the ``eval_shape`` tree of the full-size vidax model. The original release's shapes give
the published config."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from flax import nnx  # noqa: E402

from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan_full_size")

DIT = dict(in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128, num_layers=20,
           num_single_layers=40, num_refiner_layers=2, mlp_ratio=4.0, patch_size=2, patch_size_t=1,
           qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=4096, pooled_projection_dim=768,
           rope_theta=256.0, rope_axes_dim=(16, 56, 56), image_condition_type=None)
LLAMA_8B = dict(vocab_size=128320, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0,
                rms_norm_eps=1e-5)
CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
              max_position_embeddings=77, projection_dim=768, hidden_act="quick_gelu")


def test_every_registered_hunyuan_model_is_covered():
    """The 1.0 ids are checked here; the 1.5 ids' DiT in test_hunyuan15_full_size.py."""
    from vidax_hunyuan.hunyuan15_presets import HUNYUAN15_IDS

    assert registered_models("hunyuan") - HUNYUAN15_IDS == {"hunyuanvideo-t2v-13b", "hunyuanvideo-i2v-13b"}


@pytest.mark.parametrize("variant", [None, "token_replace"])
def test_full_size_dit(variant):
    from diffusers import HunyuanVideoTransformer3DModel

    from vidax_hunyuan.convert_dit import convert_dit
    from vidax_hunyuan.dit import HunyuanDiT, HunyuanDiTConfig
    from vidax_hunyuan.original_format import dit_config

    dit = dict(DIT, image_condition_type=variant)
    cfg = HunyuanDiTConfig.from_config(dit)
    size = check_full_size(lambda: HunyuanVideoTransformer3DModel(**dit),
                           lambda t, flat: convert_dit(t, flat, check_only=True),
                           lambda: HunyuanDiT(cfg, rngs=nnx.Rngs(0)), label="hunyuanvideo-13b", params=(12.5e9, 13.5e9))
    assert HunyuanDiTConfig.from_config(dit_config(size.tensors, {"image_condition_type": variant})) == cfg


def test_full_size_text_encoders():
    from transformers import CLIPTextConfig, CLIPTextModel, LlamaConfig, LlamaModel

    from vidax_core.encoders import decoder_llm as dl
    from vidax_core.encoders.vit import ViTConfig, ViTEncoder, vit_ignore, vit_rules

    hf = LlamaConfig(**LLAMA_8B)
    cfg = dl.DecoderLLMConfig.from_config(hf.to_dict())
    check_full_size(lambda: LlamaModel(hf),
                    lambda t, flat: dl.convert_params(cfg, t, flat, component="text_encoder", check_only=True),
                    lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)), component="text_encoder", ignore=dl.IGNORE)
    vcfg = ViTConfig.clip_text(CLIPTextConfig(**CLIP_L).to_dict())
    check_full_size(lambda: CLIPTextModel(CLIPTextConfig(**CLIP_L)), vit_rules(vcfg),
                    lambda: ViTEncoder(vcfg, rngs=nnx.Rngs(0)), component="text_encoder_2", ignore=vit_ignore(vcfg))
    assert cfg.hidden_size == DIT["text_embed_dim"] and vcfg.hidden_size == DIT["pooled_projection_dim"]
