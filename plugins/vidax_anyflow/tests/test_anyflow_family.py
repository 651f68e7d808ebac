"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny AnyFlow-FAR DiT (4 heads) over three chunks
(1 + 2 + 1 latent frames, the first compressed after the second) at full_chunk_limit 2 with classifier-free
guidance: TP 2 x SP 2 and offload with SP 2 give the one-device latents.
Under SP the KV cache holds each device's heads over the whole past (as Ulysses' all-to-all leaves them) and the
chunk attends to it inside the all-to-all; under offload the cache-writing call streams the blocks with the cache
riding in the carry."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_anyflow.tiny import save_tiny_anyflow

pytestmark = pytest.mark.xdist_group("anyflow_family")


class TestAnyFlowFamily(FamilyTests):
    model_id = "anyflow-far-wan2.1-1.3b"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=1",
                 "sampling.height=32", "sampling.width=32", "sampling.num_frames=13", "sampling.guidance_scale=3.0",
                 "sampling.max_sequence_length=16")
    golden = os.path.join(os.path.dirname(__file__), "golden", "anyflow_tiny_sharding.json")
    tp2_weight_fraction = 0.8

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_anyflow(folder, "far", seed=5, dit={"num_attention_heads": 4})
