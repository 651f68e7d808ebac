"""Full-size architecture check without weights: the published LTX-Video 0.9.8 DiT configurations (2B: 28 blocks
of 32 x 64; 13B: 48 blocks of 32 x 128) and the T5 v1.1 XXL encoder are built by the PyTorch reference on the meta
device and their key -> shape lists must be exactly what vidax's tables expect from the ``eval_shape`` tree of the
full-size vidax model. The 13B config is also read the way the original single file carries it (metadata)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from flax import nnx  # noqa: E402

from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_full_size")

DIT_2B = dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
              attention_head_dim=64, cross_attention_dim=2048, num_layers=28, caption_channels=4096)
DIT_13B = dict(DIT_2B, attention_head_dim=128, cross_attention_dim=4096, num_layers=48)
DITS = {"ltx-video-2b-0.9.8-distilled": DIT_2B, "ltx-video-13b-0.9.8-dev": DIT_13B,
        "ltx-video-13b-0.9.8-distilled": DIT_13B}
# The transformer part of the original files' metadata config (ltxv-13b-0.9.8-*.safetensors).
ORIGINAL_13B = {"_class_name": "Transformer3DModel", "activation_fn": "gelu-approximate", "attention_bias": True,
                "attention_head_dim": 128, "caption_channels": 4096, "cross_attention_dim": 4096, "in_channels": 128,
                "norm_elementwise_affine": False, "norm_eps": 1e-06, "num_attention_heads": 32, "num_layers": 48,
                "out_channels": 128, "qk_norm": "rms_norm", "positional_embedding_type": "rope",
                "positional_embedding_theta": 10000.0, "positional_embedding_max_pos": [20, 2048, 2048]}
T5_V1_1_XXL = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
                   relative_attention_num_buckets=32, relative_attention_max_distance=128,
                   feed_forward_proj="gated-gelu", is_gated_act=True)


def test_every_registered_ltx_model_is_covered():
    from vidax_ltx.ltx2_presets import LTX2_IDS  # LTX-2.x: test_ltx2_dit.py

    assert registered_models("ltx") - LTX2_IDS == set(DITS)


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    from diffusers import LTXVideoTransformer3DModel

    from vidax_ltx.convert_dit import DIT_RULES
    from vidax_ltx.dit import LTXDiT, LTXDiTConfig

    cfg = DITS[model_id]
    check_full_size(lambda: LTXVideoTransformer3DModel(**cfg), DIT_RULES,
                    lambda: LTXDiT(LTXDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id,
                    params=(1.8e9, 2.2e9) if "2b" in model_id else (12.5e9, 14.0e9))


def test_original_metadata_config_gives_the_13b_dit():
    from vidax_ltx.dit import LTXDiTConfig
    from vidax_ltx.original_format import dit_config

    assert LTXDiTConfig.from_config(dit_config(ORIGINAL_13B, "meta")) == LTXDiTConfig.from_config(DIT_13B)


def test_full_size_t5_v1_1_xxl():
    from transformers import T5Config as HFConfig, T5EncoderModel

    from vidax_core.encoders.t5 import T5Config, T5Encoder, t5_rules

    hf = HFConfig(**T5_V1_1_XXL)
    cfg = T5Config.from_config(hf.to_dict())
    check_full_size(lambda: T5EncoderModel(hf), t5_rules(cfg), lambda: T5Encoder(cfg, rngs=nnx.Rngs(0)),
                    component="text_encoder")
