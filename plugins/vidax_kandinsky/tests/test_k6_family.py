"""The core's family checks (vidax_core.testing.FamilyTests) on tiny Kandinsky 6 runs (4 heads per stream, 2 text
+ 2 fused blocks): image to video+audio with classifier-free guidance (the reference tail frame, its token type and
RoPE index; both prompt branches) under TP 2 x SP 2 (video tokens split over sp, the audio and text streams whole on
every rank: the cross-stream attentions are a cross-attention to whole keys and a gather of the sharded video keys)
and with offload of the three block stacks and SP 2; the SR id's NABLA DiT under the same layouts; the golden
sharding tables. One class per model: each runs its layouts in one subprocess."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.reference import write_test_image

pytestmark = pytest.mark.xdist_group("kandinsky6_family")

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "kandinsky6_tiny_sharding.json")
RUN = ("prompt=a man plays a red electric guitar", "negative_prompt=blurry", "sampling.num_steps=2",
       "sampling.height=32", "sampling.width=32", "sampling.num_frames=9", "sampling.guidance_scale=5.0",
       "sampling.max_sequence_length=128")
WIDE = dict(model_dim=64, ff_dim=96, model_dim_a=64, ff_dim_a=80)  # 4 heads per stream: tp 2 x sp 2


class TestKandinsky6Family(FamilyTests):
    """Image to video+audio with classifier-free guidance: the reference tail frame (its token type and RoPE index)
    and both prompt branches under TP 2 x SP 2, and with the three block stacks streamed under SP 2."""

    model_id = "kandinsky6-ti2va-lite"
    overrides = RUN
    golden = GOLDEN
    tp2_weight_fraction = 0.8
    image_file = "input.png"

    @staticmethod
    def make_checkpoint(folder):
        from vidax_kandinsky.k6_tiny import save_tiny_k6

        save_tiny_k6(folder, seed=5, dit=WIDE)
        write_test_image(os.path.join(folder, "input.png"), size=(40, 24))


SR_WIDE = dict(model_dim=64, ff_dim=96)  # 4 heads: tp 2 x sp 2


class TestKandinsky6SRFamily(FamilyTests):
    """The SR id: x2 over a 16 x 40 clip (a 1 x 2 grid of 16 x 32 tiles), one tile per window; the NABLA attention
    after the Ulysses all-to-all (each device's heads see the whole tile), its block stack streamed with SP 2."""

    model_id = "kandinsky6-vsr"
    overrides = ("sampling.num_steps=2", "sampling.height=16", "sampling.width=40", "sampling.num_frames=5",
                 "options.resolution_scale=2.0")
    golden = os.path.join(os.path.dirname(__file__), "golden", "kandinsky6_sr_tiny_sharding.json")

    @classmethod
    def base_overrides(cls, checkpoint):
        return [*super().base_overrides(checkpoint), f"video={os.path.join(checkpoint, 'clip.npy')}"]

    @staticmethod
    def make_checkpoint(folder):
        import numpy as np

        from vidax_kandinsky.k6sr_tiny import save_tiny_sr

        save_tiny_sr(folder, seed=7, dit=SR_WIDE)
        rng = np.random.default_rng(0)
        np.save(os.path.join(folder, "clip.npy"), rng.uniform(0, 1, (5, 16, 40, 3)).astype(np.float32))
