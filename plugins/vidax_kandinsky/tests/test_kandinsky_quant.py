"""8-bit Kandinsky 5 (``model.weight_dtype=int8``; float8_e4m3fn takes the same path in the core): the blocks'
attention and feed-forward kernels are stored 8-bit with per-channel scales
(the modulation layers stay float32, as the reference keeps them), the
resident weight bytes drop, and the run gives the bfloat16 run's video up to 8-bit rounding. On the built-in tiny
checkpoint (the tiny widths keep the float32 modulation a large share, so the drop is smaller than at full size)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidax_core import cli

RUN = ["model.id=kandinsky5-t2v-lite", "model.checkpoint=builtin:tiny-random", "model.dtype=bfloat16",
       "prompt=a red fox", "negative_prompt=blurry", "sampling.height=32", "sampling.width=32",
       "sampling.num_frames=5", "sampling.num_steps=2", "sampling.max_sequence_length=128", "output.path=null"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("kandinsky_quant")

    def run(name, *extra):
        m, lat = out / f"{name}.json", out / f"{name}.npy"
        assert cli.main(["run", *RUN, f"output.metrics={m}", f"output.save_latents={lat}", *extra, "--quiet"]) == 0
        return json.loads(m.read_text()), np.load(lat)

    return {"bf16": run("bf16"), "int8": run("int8", "model.weight_dtype=int8")}


def test_8bit_weights(runs, name="int8", storage="int8"):
    full, eight = runs["bf16"][0]["peak_resident_weight_bytes"], runs[name][0]["peak_resident_weight_bytes"]
    rel = float(np.linalg.norm(runs[name][1] - runs["bf16"][1]) / np.linalg.norm(runs["bf16"][1]))
    print(f"kandinsky {name}: resident {eight} B / bf16 {full} B = {eight / full:.3f}; latents rel {rel:.2e}")
    assert runs[name][0]["weight_storage"] == [storage] and runs["bf16"][0]["weight_storage"] == [None]
    assert eight < 0.9 * full
    assert rel < 5e-2
