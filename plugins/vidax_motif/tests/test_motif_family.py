"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Motif-Video image-to-video run (4 heads; one
dual block, two single blocks with the text cross-attention, one DDT decoder block; SigLIP image tokens in front of
the text; adaptive projected guidance with its momentum) under TP 2 x SP 2 (video tokens split over sp, the
conditioning stream whole on every rank, the decoder's two video streams interleaved) and with offload of the three
block stacks and SP 2; the golden sharding table. Text-to-video runs the same blocks without the image tokens."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.reference import write_test_image

pytestmark = pytest.mark.xdist_group("motif_family")


class TestMotifFamily(FamilyTests):
    model_id = "motif-video-2b"
    overrides = ("prompt=a red fox runs across a snowy field", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=32", "sampling.width=48", "sampling.num_frames=9",
                 "sampling.max_sequence_length=16")
    golden = os.path.join(os.path.dirname(__file__), "golden", "motif_tiny_sharding.json")
    image_file = "input.png"
    tp2_weight_fraction = 0.8

    @staticmethod
    def make_checkpoint(folder):
        from vidax_motif.tiny import save_tiny_motif

        save_tiny_motif(folder, "i2v", seed=5, dit={"num_attention_heads": 4})
        write_test_image(os.path.join(folder, "input.png"), size=(40, 56))
