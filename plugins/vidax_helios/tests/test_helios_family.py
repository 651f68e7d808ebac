"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Helios DiT (4 heads, amplified history keys)
over two chunks: TP 2 x SP 2 and offload with SP 2 give the one-device latents (the history tokens and their
modulation, RoPE and key scales under Ulysses and the block streaming); the same for the pyramid pipeline
(Helios-Distilled over two chunks: three stages per chunk, the chunk's tokens 16x fewer in the first)."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_helios.tiny import as_pyramid, save_tiny_helios

pytestmark = pytest.mark.xdist_group("helios_family")


class TestHeliosFamily(FamilyTests):
    model_id = "helios-base"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=32", "sampling.width=32", "sampling.num_frames=18", "sampling.guidance_scale=5.0",
                 "sampling.max_sequence_length=16", "options.history_sizes=[4, 2, 1]",
                 "options.num_latent_frames_per_chunk=3")
    golden = os.path.join(os.path.dirname(__file__), "golden", "helios_tiny_sharding.json")
    tp2_weight_fraction = 0.85  # the tiny history patch embeddings (replicated) weigh much more than at full size

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_helios(folder, seed=5, dit={"num_attention_heads": 4, "rope_dim": (4, 4, 4),
                                              "is_amplify_history": True})


class TestHeliosPyramidFamily(FamilyTests):
    model_id = "helios-distilled"
    overrides = ("prompt=a small red fox runs in the snow", "sampling.num_steps=3", "sampling.height=64",
                 "sampling.width=64", "sampling.num_frames=9", "sampling.guidance_scale=1.0",
                 "sampling.max_sequence_length=16", "options.history_sizes=[8, 2, 1]",
                 "options.num_latent_frames_per_chunk=2", "options.pyramid_num_inference_steps_list=[1, 1, 1]")
    golden = os.path.join(os.path.dirname(__file__), "golden", "helios_pyramid_tiny_sharding.json")
    tp2_weight_fraction = 0.85

    @staticmethod
    def make_checkpoint(folder):
        TestHeliosFamily.make_checkpoint(folder)
        as_pyramid(str(folder), "helios-distilled")
