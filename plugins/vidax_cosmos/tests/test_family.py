"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Cosmos-Predict2.5 (4 heads, 4 blocks):
TP, SP, TP x SP, offload alone and with SP give the one-device latents; the sharding table is golden. Three latent
frames of 16 tokens each, so SP 2 and 4 split inside frames (the per-frame AdaLN-LoRA modulation must still be
exact), and an image-to-world run under SP 2 x offload covers the conditioning path."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from vidax_core.testing.family import FamilyTests
from vidax_testing.tiny_cosmos import save_tiny_cosmos

pytestmark = pytest.mark.xdist_group("cosmos_family")

IMAGE = os.path.join(os.path.dirname(__file__), "golden", "input.png")
OUT = tempfile.mkdtemp(prefix="vidax-cosmos-family-")


def _write_image() -> None:
    from PIL import Image

    if not os.path.exists(IMAGE):
        rng = np.random.default_rng(1)
        Image.fromarray((rng.random((64, 64, 3)) * 255).astype(np.uint8)).save(IMAGE)


class TestCosmosFamily(FamilyTests):
    model_id = "cosmos-predict2.5-2b"
    overrides = ("prompt=a red car drives through the city at night", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=9", "sampling.guidance_scale=5.0",
                 "sampling.max_sequence_length=96")
    golden = os.path.join(os.path.dirname(__file__), "golden", "cosmos_tiny_sharding.json")
    parallel_configs = {
        **FamilyTests.parallel_configs,
        "sp4": ("parallel.dp=1", "parallel.sp=4"),
    }
    extra_configs = {
        "i2w": ("parallel.dp=1", f"image={IMAGE}", f"output.save_latents={OUT}/i2w.npy"),
        "i2w_sp2_offload": ("parallel.dp=1", "parallel.sp=2", "offload.enabled=true", f"image={IMAGE}",
                            f"output.save_latents={OUT}/i2w_sp2_offload.npy"),
    }

    @staticmethod
    def make_checkpoint(folder):
        import torch

        _write_image()
        torch.manual_seed(0)
        save_tiny_cosmos(folder, seed=3, dit={"num_attention_heads": 4, "num_layers": 4})

    def test_image_to_world_parallel_offload(self, family_runs):
        for name in ("i2w", "i2w_sp2_offload"):
            assert "error" not in family_runs[name], family_runs[name].get("error")
        a, b = np.load(f"{OUT}/i2w.npy"), np.load(f"{OUT}/i2w_sp2_offload.npy")
        rel = float(np.linalg.norm(b - a) / np.linalg.norm(a))
        print(f"{self.model_id} image-to-world sp2+offload: rel err vs 1 device {rel:.2e}")
        assert rel < self.tolerance

    def test_tp_shards_the_weights_and_sp_does_not(self, family_runs):
        full = family_runs["single"]["peak_resident_weight_bytes"]
        assert family_runs["tp2"]["peak_resident_weight_bytes"] < 0.7 * full
        assert family_runs["sp2"]["peak_resident_weight_bytes"] == full
