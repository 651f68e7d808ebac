"""Full-size architecture check without weights: the published Cosmos-Predict2.5 DiT configurations (2B: 28 blocks
of 16 x 128; 14B: 36 blocks of 40 x 128; the numbers diffusers' conversion script writes) and the Cosmos-Reason1-7B
text encoder (Qwen2.5-VL-7B) are built by the PyTorch reference on the meta device; their key -> shape lists must be
exactly what vidax's tables expect from the ``eval_shape`` tree of the full-size vidax model. The original release
layout's shapes give the same config."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from flax import nnx  # noqa: E402

from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("cosmos_full_size")

_COMMON = dict(in_channels=17, out_channels=16, attention_head_dim=128, mlp_ratio=4.0, text_embed_dim=1024,
               adaln_lora_dim=256, max_size=(128, 240, 240), patch_size=(1, 2, 2), rope_scale=(1.0, 3.0, 3.0),
               concat_padding_mask=True, extra_pos_embed_type=None, use_crossattn_projection=True,
               crossattn_proj_in_channels=100352, encoder_hidden_states_channels=1024)
DITS = {
    "cosmos-predict2.5-2b": dict(_COMMON, num_attention_heads=16, num_layers=28),
    "cosmos-predict2.5-14b": dict(_COMMON, num_attention_heads=40, num_layers=36),
}
# Cosmos-Reason1-7B's text tower (Qwen2.5-VL-7B-Instruct numbers).
QWEN_7B = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
               rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]})


def test_every_registered_cosmos_model_is_covered():
    from test_cosmos3_full_size import CONFIGS as COSMOS3  # the Cosmos3 ids' full-size check lives there

    assert registered_models("cosmos") == set(DITS) | set(COSMOS3)


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    from diffusers import CosmosTransformer3DModel

    from vidax_cosmos.convert_dit import DIT_RULES
    from vidax_cosmos.dit import CosmosDiT, CosmosDiTConfig
    from vidax_cosmos.original_format import dit_config

    cfg = DITS[model_id]
    size = check_full_size(lambda: CosmosTransformer3DModel(**cfg), DIT_RULES,
                           lambda: CosmosDiT(CosmosDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id,
                           params=(1.8e9, 2.4e9) if "2b" in model_id else (13.0e9, 15.0e9))
    # the original release's shapes (same tensors under diffusers names) give the same config
    assert CosmosDiTConfig.from_config(dit_config(size.tensors)) == CosmosDiTConfig.from_config(cfg)


def test_full_size_text_encoder():
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from vidax_core.encoders import decoder_llm as dl

    hf = Qwen2_5_VLConfig(text_config=QWEN_7B, vocab_size=QWEN_7B["vocab_size"])
    cfg = dl.DecoderLLMConfig.from_config(hf.to_dict())
    check_full_size(lambda: Qwen2_5_VLForConditionalGeneration(hf),
                    lambda t, flat: dl.convert_params(cfg, t, flat, component="text_encoder", check_only=True),
                    lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)), component="text_encoder", ignore=dl.IGNORE)
    assert cfg.hidden_size * cfg.num_hidden_layers == DITS["cosmos-predict2.5-2b"]["crossattn_proj_in_channels"]
