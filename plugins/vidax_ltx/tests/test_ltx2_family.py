"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny LTX-2.5-style pipeline (4 video and 4 audio
heads, 2 blocks) running the dev recipe's four guidance passes: TP 2 x SP 2 (heads of both streams over tp, video
tokens over sp, the audio stream replicated, video-to-audio through gathered keys), offload with SP 2 (the (video,
audio) carry, the STG pass's layer index), the golden sharding table."""

from __future__ import annotations

import os
import shutil

import pytest

from vidax_core.testing.family import FamilyTests

pytestmark = pytest.mark.xdist_group("ltx2_family")

#: 4 heads per stream, so tp 2 x sp 2 splits both; widths as the tiny connectors give them.
DIT = dict(num_attention_heads=4, attention_head_dim=8, audio_num_attention_heads=4, audio_attention_head_dim=4)


class TestLTX2Family(FamilyTests):
    model_id = "ltx-2.5-22b-dev"
    overrides = ("prompt=a small red fox barks in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=128", "sampling.num_frames=9",
                 "sampling.max_sequence_length=16", "options.spatio_temporal_guidance_blocks=[1]")
    golden = os.path.join(os.path.dirname(__file__), "golden", "ltx2_tiny_sharding.json")
    # TP 2 measured 0.81 of the one-device weights: the tiny model's eight AdaLN-single embedders (256-wide
    # sinusoid MLPs, replicated) weigh about as much as its two 32-wide blocks; in the published models the blocks
    # are nearly all of it.
    tp2_weight_fraction = 0.85

    @staticmethod
    def make_checkpoint(folder):
        from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

        _, ckpt = build_tiny_ltx2_pipeline(os.path.join(folder, "build"), "ltx2.5", seed=5, dit=DIT)
        for name in os.listdir(ckpt):
            shutil.move(os.path.join(ckpt, name), os.path.join(folder, name))
        shutil.rmtree(os.path.join(folder, "build"))
