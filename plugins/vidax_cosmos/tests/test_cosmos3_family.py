"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Edge-style Cosmos3 (4 query / 2 key-value
heads, relu^2, Nemotron norms, ``k_norm_und_for_gen``), run as image-to-video so the conditioning frame (no timestep
embedding, zero velocity) is covered: TP 2 x SP 2 (GQA: each tp shard holds one key/value head and its two query
heads; video tokens over sp) and offload with SP 2 give the one-device latents; the sharding table is golden.
Three latent frames of
4 tokens each; the two guidance branches run at their own text lengths."""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.family import FamilyTests

pytest.importorskip("torch")
pytest.importorskip("diffusers")

pytestmark = pytest.mark.xdist_group("cosmos3_family")

IMAGE = os.path.join(os.path.dirname(__file__), "golden", "input.png")


def _write_image() -> None:
    from PIL import Image

    if not os.path.exists(IMAGE):
        rng = np.random.default_rng(1)
        Image.fromarray((rng.random((64, 64, 3)) * 255).astype(np.uint8)).save(IMAGE)


class TestCosmos3Family(FamilyTests):
    model_id = "cosmos3-edge"
    overrides = ("prompt=a red car drives through the city at night", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=9", "sampling.guidance_scale=4.0",
                 f"image={IMAGE}")
    golden = os.path.join(os.path.dirname(__file__), "golden", "cosmos3_tiny_sharding.json")
    tp2_weight_fraction = 0.8

    @staticmethod
    def make_checkpoint(folder):
        from vidax_cosmos.cosmos3_tiny import save_tiny_cosmos3

        _write_image()
        save_tiny_cosmos3(folder, "edge", seed=3)
