"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny SkyReels-V2 diffusion-forcing DiT (4 heads,
fps embedding) over two overlapping windows with asynchronous causal blocks and the re-noised prefix: TP 2 x SP 2
and offload with SP 2 give the one-device latents (per-frame modulation, block-causal attention and the prefix
re-noising under Ulysses and the block streaming)."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_skyreels.tiny import save_tiny_skyreels

pytestmark = pytest.mark.xdist_group("skyreels_family")


class TestSkyReelsFamily(FamilyTests):
    model_id = "skyreels-v2-df-1.3b-540p"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=32", "sampling.width=32", "sampling.num_frames=21", "sampling.guidance_scale=5.0",
                 "sampling.max_sequence_length=16", "options.base_num_frames=13", "options.overlap_history=5",
                 "options.ar_step=1", "options.causal_block_size=2", "options.addnoise_condition=20")
    golden = os.path.join(os.path.dirname(__file__), "golden", "skyreels_tiny_sharding.json")
    tp2_weight_fraction = 0.8

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_skyreels(folder, "df", seed=5, dit={"num_attention_heads": 4})
