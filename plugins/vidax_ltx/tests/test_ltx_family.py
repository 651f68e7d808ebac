"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny LTX-Video (4 heads, 4 blocks) running the
presets' path, the multi-scale recipe with LTXConditionPipeline semantics (two passes around the latent upscaler):
TP 2 x SP 2 (the packed video tokens split over sp, per-token RoPE coordinates with them), SP 4 x DP 2 (the
guidance halves), offload with SP 2, the golden sharding table."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.tiny.ltx import random_ltx_upsampler, save_tiny_ltx

pytestmark = pytest.mark.xdist_group("ltx_family")


class TestLTXFamily(FamilyTests):
    model_id = "ltx-video-13b-0.9.8-dev"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=96", "sampling.width=96", "sampling.num_frames=17", "sampling.guidance_scale=3.0",
                 "sampling.max_sequence_length=16", "options.guidance_rescale=0.5", "options.second_pass_steps=2",
                 "options.second_pass_denoise_strength=0.5")  # passes at 64x64 and 128x128
    golden = os.path.join(os.path.dirname(__file__), "golden", "ltx_tiny_sharding.json")
    tp2_weight_fraction = 0.7
    parallel_configs = {**FamilyTests.parallel_configs, "sp4_dp2": ("parallel.dp=2", "parallel.sp=4")}

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_ltx(folder, kind="condition", seed=3,
                      dit={"num_attention_heads": 4, "attention_head_dim": 8, "num_layers": 4})
        random_ltx_upsampler(seed=5).save_pretrained(os.path.join(folder, "latent_upsampler"))
