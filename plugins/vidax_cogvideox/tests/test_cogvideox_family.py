"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny CogVideoX1.5-like model with 6 heads, which
(like 2B's 30) split over tp=2 but not 4: TP 2, SP 3 over the joint sequence (video tokens split, text
tokens replicated, Ulysses joint attention; RoPE tables and the padded front frame with them), TP 2 x SP 3,
offload with SP 2, the golden sharding table. A second, 2B-like model (sin-cos positions split with the
video tokens) with 4 heads covers SP 4, TP 2 x SP 2 and offload with TP 2."""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.tiny.cogvideox import save_tiny_cogvideox

pytestmark = pytest.mark.xdist_group("cogvideox_family")

BASE = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
        "sampling.num_frames=9", "sampling.guidance_scale=6.0", "sampling.max_sequence_length=12")


class TestCogVideoX15Family(FamilyTests):
    model_id = "cogvideox1.5-5b"
    # 48 x 32 px: 3 x 2 tokens per frame, 4 padded latent frames -> 2 token frames: 12 video tokens
    overrides = (*BASE, "sampling.height=32", "sampling.width=48")
    golden = os.path.join(os.path.dirname(__file__), "golden", "cogvideox15_tiny_sharding.json")
    parallel_configs = {
        "tp2": ("parallel.dp=1", "parallel.tp=2"),
        "sp3": ("parallel.dp=1", "parallel.sp=3"),
        "tp2sp3": ("parallel.dp=1", "parallel.tp=2", "parallel.sp=3"),
    }

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_cogvideox(folder, variant="1.5", seed=3, dit={"num_attention_heads": 6, "num_layers": 4})

    def test_tp_shards_the_weights_and_sp_does_not(self, family_runs):
        full = family_runs["single"]["peak_resident_weight_bytes"]
        assert family_runs["tp2"]["peak_resident_weight_bytes"] < 0.7 * full
        assert family_runs["sp3"]["peak_resident_weight_bytes"] == full
        assert family_runs["tp2sp3"]["peak_resident_weight_bytes"] == family_runs["tp2"]["peak_resident_weight_bytes"]


class TestCogVideoX2BStyleFamily(FamilyTests):
    model_id = "cogvideox-2b"
    overrides = (*BASE, "sampling.height=32", "sampling.width=32")  # 3 frames x 2 x 2 = 12 video tokens
    golden = os.path.join(os.path.dirname(__file__), "golden", "cogvideox2b_tiny_sharding.json")
    parallel_configs = {
        "sp4": ("parallel.dp=1", "parallel.sp=4"),
        "tp2sp2": ("parallel.dp=1", "parallel.tp=2", "parallel.sp=2"),
    }
    offload_configs = {"off2tp2": ("parallel.dp=1", "parallel.tp=2", "offload.enabled=true", "offload.chunk_size=2")}

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_cogvideox(folder, variant="2b", seed=4, dit={"num_attention_heads": 4, "num_layers": 4})


class TestCogVideoX5BI2VFamily(FamilyTests):
    """Image-to-video with 5B-I2V's learned [text; video] position table: its video part is split over sp with the
    tokens, the image latents concatenated on channels before the patch embedding."""

    model_id = "cogvideox-5b-i2v"
    overrides = (*BASE, "sampling.height=32", "sampling.width=32")  # the tiny table's training size
    golden = os.path.join(os.path.dirname(__file__), "golden", "cogvideox5b_i2v_tiny_sharding.json")
    offload_configs = {}

    @classmethod
    def base_overrides(cls, checkpoint):
        return [*super().base_overrides(checkpoint), f"image={os.path.join(checkpoint, 'first_frame.png')}"]

    @staticmethod
    def make_checkpoint(folder):
        from PIL import Image

        save_tiny_cogvideox(folder, variant="5b-i2v", seed=5, dit={"num_attention_heads": 4, "num_layers": 2})
        rng = np.random.default_rng(2)
        Image.fromarray((rng.random((32, 32, 3)) * 255).astype(np.uint8)).save(os.path.join(folder, "first_frame.png"))
