"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny checkpoint: the converted checkpoint fills
exactly the model's tree, TP x SP and offload with SP give the one-device latents, and the sharding of every
parameter matches golden/sharding.json. The parallel runs use 8 fake CPU devices in a
subprocess."""

from __future__ import annotations

import os

from vidax_example_plugin.tiny import write_tiny

from vidax_core.testing import FamilyTests


class TestExampleFamily(FamilyTests):
    model_id = "example-tiny"
    overrides = ("prompt=a paper boat", "negative_prompt=blurry", "sampling.num_steps=2", "sampling.height=16",
                 "sampling.width=16", "sampling.num_frames=2", "sampling.max_sequence_length=8")
    golden = os.path.join(os.path.dirname(__file__), "golden", "sharding.json")
    plugin_modules = ("vidax_example_plugin.plugin",)  # its register(plugins), for a checkout that is not installed

    @staticmethod
    def make_checkpoint(folder):
        write_tiny(folder, seed=1)
