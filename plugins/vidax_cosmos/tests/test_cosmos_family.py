"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Cosmos-Predict2.5 (4 heads, 4 blocks), run
as image-to-world so the conditioning path (clean frames, per-frame timesteps, velocity replacement) is covered too:
TP x SP, SP 4 and offload with SP give the one-device latents; the sharding table is golden. Three latent
frames of 4 tokens each, so SP 2 and 4 split inside frames (the per-frame AdaLN-LoRA modulation must stay exact)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.family import FamilyTests
from vidax_cosmos.tiny import save_tiny_cosmos

pytestmark = pytest.mark.xdist_group("cosmos_family")

IMAGE = os.path.join(os.path.dirname(__file__), "golden", "input.png")


def _write_image() -> None:
    from PIL import Image

    if not os.path.exists(IMAGE):
        rng = np.random.default_rng(1)
        Image.fromarray((rng.random((64, 64, 3)) * 255).astype(np.uint8)).save(IMAGE)


class TestCosmosFamily(FamilyTests):
    model_id = "cosmos-predict2.5-2b"
    overrides = ("prompt=a red car drives through the city at night", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=32", "sampling.width=32", "sampling.num_frames=9", "sampling.guidance_scale=5.0",
                 "sampling.max_sequence_length=96", f"image={IMAGE}")
    golden = os.path.join(os.path.dirname(__file__), "golden", "cosmos_tiny_sharding.json")
    tp2_weight_fraction = 0.7
    parallel_configs = {
        **FamilyTests.parallel_configs,
        "sp4": ("parallel.dp=1", "parallel.sp=4"),
    }

    @staticmethod
    def make_checkpoint(folder):
        import torch

        _write_image()
        torch.manual_seed(0)
        save_tiny_cosmos(folder, seed=3, dit={"num_attention_heads": 4, "num_layers": 4})
