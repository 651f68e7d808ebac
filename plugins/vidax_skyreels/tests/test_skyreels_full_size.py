"""Full-size architecture check without weights: every SkyReels-V2 id's published transformer configuration is
built by the PyTorch reference on the meta device and vidax's key table must fill the full-size ``eval_shape``
tree exactly, with as many parameters (the Wan VAE and UMT5 full-size checks are the Wan family's)."""

from __future__ import annotations

import pytest
from flax import nnx

from vidax_core.testing.reference import check_full_size, registered_models

pytest.importorskip("torch")

# The transformer configs of the Skywork/SkyReels-V2-*-Diffusers repositories (diffusers' conversion script
# scripts/convert_skyreelsv2_to_diffusers.py): Wan2.1-1.3B / 14B widths; the 1.3B diffusion-forcing model
# embeds the fps (inject_sample_info), the 14B ones do not.
COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, text_dim=4096, freq_dim=256, cross_attn_norm=True,
              qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024, in_channels=16, out_channels=16)
S13B = dict(num_attention_heads=12, ffn_dim=8960, num_layers=30)
S14B = dict(num_attention_heads=40, ffn_dim=13824, num_layers=40)
DITS = {
    "skyreels-v2-df-1.3b-540p": dict(COMMON, **S13B, inject_sample_info=True),
    "skyreels-v2-df-14b-540p": dict(COMMON, **S14B, inject_sample_info=False),
    "skyreels-v2-df-14b-720p": dict(COMMON, **S14B, inject_sample_info=False),
    "skyreels-v2-t2v-14b-540p": dict(COMMON, **S14B, inject_sample_info=False),
    # Wan2.1-I2V-14B's layout: 36 input channels (latents, mask, image latents), CLIP ViT-H tokens (width 1280)
    "skyreels-v2-i2v-14b-540p": dict(COMMON, **S14B, inject_sample_info=False, in_channels=36, image_dim=1280,
                                     added_kv_proj_dim=5120),
}
BOUNDS = {"skyreels-v2-df-1.3b-540p": (1.3e9, 1.5e9),  # published sizes: 1.3B and 14B (16.4B with the image parts)
          "skyreels-v2-i2v-14b-540p": (1.6e10, 1.7e10)}
SCHEDULER_SHIFT = 8.0  # the recipe's flow shift, in the published scheduler configs


def test_every_registered_skyreels_model_is_covered():
    ids = registered_models("skyreels")
    assert ids <= set(DITS), f"add the published config of {sorted(ids - set(DITS))} here"


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    from diffusers import SkyReelsV2Transformer3DModel

    from vidax_skyreels.convert_dit import DIT_RULES
    from vidax_skyreels.dit import SkyReelsDiT, SkyReelsDiTConfig

    cfg = DITS[model_id]
    check_full_size(lambda: SkyReelsV2Transformer3DModel(**cfg), DIT_RULES,
                    lambda: SkyReelsDiT(SkyReelsDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id,
                    params=BOUNDS.get(model_id, (1.3e10, 1.5e10)))
