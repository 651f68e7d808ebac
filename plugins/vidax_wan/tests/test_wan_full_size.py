"""Full-size architecture check without weights.

For every Wan model id, the published configuration is instantiated by the PyTorch reference on the meta device
(no memory) and its key -> shape list must be exactly what vidax's conversion tables expect from the
``eval_shape`` tree of the full-size vidax model. Zero-stride stand-in arrays carry the shapes, so nothing of
the real size is ever allocated.
"""

from __future__ import annotations

import pytest
from flax import nnx

from vidax_core.testing.reference import check_full_size, registered_models

pytest.importorskip("torch")

# Published configurations (config.json of the Wan-AI *-Diffusers repositories).
from vidax_core.testing.published import CLIP_VIT_H, UMT5_XXL, WAN21_VAE  # noqa: E402 - parts other families share
DIT_COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, text_dim=4096, freq_dim=256, cross_attn_norm=True,
                  qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)
WAN22_VAE = dict(base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                 temperal_downsample=[False, True, True], is_residual=True, in_channels=12, out_channels=12,
                 patch_size=2, scale_factor_spatial=16,
                 latents_mean=[0.0] * 48, latents_std=[1.0] * 48)
T14B = dict(num_attention_heads=40, ffn_dim=13824, num_layers=40, in_channels=16, out_channels=16)
I14B = dict(T14B, in_channels=36)
DITS = {
    "wan2.1-t2v-1.3b": dict(num_attention_heads=12, ffn_dim=8960, num_layers=30, in_channels=16, out_channels=16),
    "wan2.1-t2v-14b": T14B,
    "wan2.1-i2v-14b-480p": dict(I14B, image_dim=1280, added_kv_proj_dim=5120),
    "wan2.1-i2v-14b-720p": dict(I14B, image_dim=1280, added_kv_proj_dim=5120),
    "wan2.2-t2v-a14b": T14B,  # both experts share this architecture
    "wan2.2-i2v-a14b": I14B,
    "wan2.2-ti2v-5b": dict(num_attention_heads=24, ffn_dim=14336, num_layers=30, in_channels=48, out_channels=48),
}
COMPONENTS = {
    model_id: {"dit": {**DIT_COMMON, **dit}, "vae": WAN22_VAE if model_id == "wan2.2-ti2v-5b" else WAN21_VAE,
               "text": UMT5_XXL, "clip": CLIP_VIT_H if "image_dim" in dit else None}
    for model_id, dit in DITS.items()
}


def test_every_registered_wan_model_is_covered():
    ids = registered_models("wan")
    assert ids <= set(COMPONENTS), f"add the published config of {sorted(ids - set(COMPONENTS))} here"


@pytest.mark.parametrize("model_id", sorted(COMPONENTS))
def test_full_size_dit(model_id):
    from diffusers import WanTransformer3DModel

    from vidax_wan.convert_dit import DIT_RULES
    from vidax_wan.dit import WanDiT, WanDiTConfig

    cfg = COMPONENTS[model_id]["dit"]
    check_full_size(lambda: WanTransformer3DModel(**cfg), DIT_RULES,
                    lambda: WanDiT(WanDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id)


@pytest.mark.parametrize("vae", ["wan2.1", "wan2.2"])
def test_full_size_vae(vae):
    from diffusers import AutoencoderKLWan

    from vidax_core.vae.convert_wan21 import VAE_RULES
    from vidax_core.vae.convert_wan22 import VAE22_RULES
    from vidax_core.vae.wan21 import WanVAE, WanVAEConfig
    from vidax_core.vae.wan22 import WanVAE22

    config = WAN21_VAE if vae == "wan2.1" else WAN22_VAE
    cls, rules = (WanVAE, VAE_RULES) if vae == "wan2.1" else (WanVAE22, VAE22_RULES)
    check_full_size(lambda: AutoencoderKLWan(**config), rules, lambda: cls(WanVAEConfig.from_config(config)),
                    component="vae")


def test_full_size_clip_vit_h():
    from transformers import CLIPVisionConfig, CLIPVisionModel

    from vidax_core.encoders.clip_vision import (CLIP_VISION_IGNORE, CLIP_VISION_RULES, CLIPVisionConfig as VC,
                                                 CLIPVisionEncoder)

    check_full_size(lambda: CLIPVisionModel(CLIPVisionConfig(**CLIP_VIT_H)), CLIP_VISION_RULES,
                    lambda: CLIPVisionEncoder(VC.from_config(CLIP_VIT_H), rngs=nnx.Rngs(0)), component="image_encoder",
                    ignore=CLIP_VISION_IGNORE)


def test_full_size_umt5_xxl():
    from transformers import UMT5Config, UMT5EncoderModel

    from vidax_core.encoders.t5 import UMT5_IGNORE, UMT5_RULES, T5Config as VidaxUMT5Config, T5Encoder as UMT5Encoder

    check_full_size(lambda: UMT5EncoderModel(UMT5Config(**UMT5_XXL)), UMT5_RULES,
                    lambda: UMT5Encoder(VidaxUMT5Config.from_config(UMT5_XXL, model_type="umt5"), rngs=nnx.Rngs(0)),
                    component="text_encoder", ignore=UMT5_IGNORE)
