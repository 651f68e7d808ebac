"""Full-size architecture check without weights for the HunyuanVideo-1.5 DiT: the published 480p / 720p
transformer configs are built by the PyTorch reference on the meta device; their key -> shape lists (in the
diffusers layout, and rewritten into the original release's layout) must be exactly what vidax's tables expect from
the ``eval_shape`` tree of the full-size vidax model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from test_hunyuan15_dit import to_original  # noqa: E402
from vidax_core.testing.reference import check_full_size  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan15_full_size")

# TRANSFORMER_CONFIGS["480p_t2v"] of diffusers' scripts/convert_hunyuan_video1_5_to_diffusers.py (the config.json
# of hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v); 480p_i2v differs in task_type,
# 720p_* in target_size 960;
# the 480p I2V step-distilled checkpoint adds use_meanflow (its second timestep embedder, the release's time_r_in).
DIT_480P_T2V = dict(in_channels=65, out_channels=32, num_attention_heads=16, attention_head_dim=128, num_layers=54,
                    num_refiner_layers=2, mlp_ratio=4.0, patch_size=1, patch_size_t=1, qk_norm="rms_norm",
                    text_embed_dim=3584, text_embed_2_dim=1472, image_embed_dim=1152, rope_theta=256.0,
                    rope_axes_dim=(16, 56, 56), use_meanflow=False, target_size=640, task_type="t2v")
CONFIGS = {
    "480p_t2v": DIT_480P_T2V,
    "480p_i2v": dict(DIT_480P_T2V, task_type="i2v"),
    "720p_t2v": dict(DIT_480P_T2V, target_size=960),
    "720p_i2v": dict(DIT_480P_T2V, target_size=960, task_type="i2v"),
    "480p_i2v_step_distilled": dict(DIT_480P_T2V, task_type="i2v", use_meanflow=True),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_full_size_dit15(name):
    from diffusers import HunyuanVideo15Transformer3DModel

    from vidax_hunyuan.convert_dit15 import convert_dit15
    from vidax_hunyuan.dit15 import HunyuanDiT15, HunyuanDiT15Config
    from vidax_hunyuan.original_dit15 import OriginalDiT15, dit15_config

    dit = CONFIGS[name]
    cfg = HunyuanDiT15Config.from_config(dit)
    size = check_full_size(lambda: HunyuanVideo15Transformer3DModel(**dit),
                           lambda t, flat: convert_dit15(t, flat, check_only=True),
                           lambda: HunyuanDiT15(cfg, rngs=nnx.Rngs(0)), label=f"hunyuanvideo-1.5 {name}",
                           params=(8.2e9, 8.5e9))  # the model card's 8.3B
    tensors, flat = size.tensors, size.flat
    assert flat[("double_blocks", "img", "q", "kernel")].shape == (54, 2048, 2048)
    assert flat[("patch_kernel",)].shape == (1, 1, 1, 65, 2048)
    original = OriginalDiT15(to_original(tensors))
    convert_dit15(original, flat, check_only=True)
    assert HunyuanDiT15Config.from_config(dit15_config(original, name)) == cfg
