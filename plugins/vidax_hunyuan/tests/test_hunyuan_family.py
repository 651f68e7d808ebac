"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny HunyuanVideo (4 heads, 2 + 2 blocks) with a
padded prompt and real CFG (two text masks of different lengths): TP 2 x SP 2 (video tokens split over sp, the
masked joint attention through Ulysses), offload of the two stacks (double then single) with SP 2 and with TP 2,
the golden sharding table."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.tiny.hunyuan import save_tiny_hunyuan

pytestmark = pytest.mark.xdist_group("hunyuan_family")


class TestHunyuanFamily(FamilyTests):
    model_id = "hunyuanvideo-t2v-13b"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=9", "sampling.guidance_scale=6.0",
                 "options.true_cfg_scale=3.0", "options.prompt_template='<|start_header_id|>user {}<|eot_id|>'",
                 "options.crop_start=2", "sampling.max_sequence_length=24")
    golden = os.path.join(os.path.dirname(__file__), "golden", "hunyuan_tiny_sharding.json")
    tp2_weight_fraction = 0.7
    offload_configs = {
        **FamilyTests.offload_configs,
        "off1tp2": ("parallel.dp=1", "parallel.tp=2", "offload.enabled=true", "offload.chunk_size=1"),
    }

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_hunyuan(folder, seed=3, dit={"num_attention_heads": 4, "attention_head_dim": 8,
                                               "rope_axes_dim": (2, 2, 4)})


class TestHunyuanI2VFamily(FamilyTests):
    """Image-to-video (token_replace: the first latent frame's tokens take the t=0 modulation, a token mask split
    over sp with the video; LLaVA prompts of different lengths for cond / uncond): TP 2 x SP 2, offload + SP 2."""

    model_id = "hunyuanvideo-i2v-13b"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=9", "sampling.guidance_scale=6.0",
                 "options.true_cfg_scale=3.0", "sampling.max_sequence_length=24",
                 "options.prompt_template='<|start_header_id|>system<|end_header_id|><image> video<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>{}<|eot_id|><|start_header_id|>assistant<|end_header_id|>'",
                 "options.crop_start=23", "options.image_emb_start=10", "options.image_emb_len=16")
    golden = os.path.join(os.path.dirname(__file__), "golden", "hunyuan_i2v_tiny_sharding.json")
    image_file = "input.png"

    @staticmethod
    def make_checkpoint(folder):
        import numpy as np
        from PIL import Image

        from vidax_core.testing.tiny.hunyuan import save_tiny_hunyuan_i2v

        save_tiny_hunyuan_i2v(folder, seed=3, dit={"num_attention_heads": 4, "attention_head_dim": 8,
                                                   "rope_axes_dim": (2, 2, 4)})
        pixels = (np.random.default_rng(1).random((40, 56, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, "input.png"))
