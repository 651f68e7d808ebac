"""The core's family checks (vidax_core.testing.FamilyTests) on tiny SANA-Video runs (2 heads, 2 blocks):
text-to-video with guidance under TP 2 x SP 2 and TP 2 x SP 4 (the linear attention exchanges no heads, so sp 4
runs over one head per tp shard, which Ulysses could not split; each sp shard holds half a frame of tokens, across
which the convolutional feed-forward reads), offload with SP 2 (the token grid rides in the aux as Python ints);
image-to-video (per-frame modulation, frame 0 held) under TP 2 x SP 2; the golden sharding table."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.reference import write_test_image

pytestmark = pytest.mark.xdist_group("sana_video_family")

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "sana_video_tiny_sharding.json")
RUN = ("prompt=a red fox runs across a snowy field", "negative_prompt=blurry", "sampling.num_steps=2",
       "sampling.height=32", "sampling.width=64", "sampling.num_frames=5", "sampling.guidance_scale=6.0",
       "sampling.max_sequence_length=8", "options.use_resolution_binning=false",
       "options.complex_human_instruction=null")


class TestSanaVideoT2VFamily(FamilyTests):
    model_id = "sana-video-2b-480p"
    overrides = RUN
    golden = GOLDEN
    parallel_configs = {"tp2sp2": ("parallel.dp=1", "parallel.tp=2", "parallel.sp=2"),
                        "tp2sp4": ("parallel.dp=1", "parallel.tp=2", "parallel.sp=4")}

    @staticmethod
    def make_checkpoint(folder):
        from vidax_sana_video.tiny import save_tiny_sana_video

        save_tiny_sana_video(folder, seed=6)


class TestSanaVideoI2VFamily(FamilyTests):
    model_id = "sana-video-2b-480p"
    overrides = RUN
    golden = GOLDEN
    image_file = "input.png"
    offload_configs = {}  # the streamed stack is the text-to-video class's; I2V adds nothing inside the blocks

    @staticmethod
    def make_checkpoint(folder):
        from vidax_sana_video.tiny import save_tiny_sana_video

        save_tiny_sana_video(folder, seed=7)
        write_test_image(os.path.join(folder, "input.png"), size=(40, 56))
