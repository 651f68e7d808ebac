"""LTX-2's four guidance passes (conditional, negative, spatio-temporal, modality-isolated) run as ONE model call
per step, the DiT taking the perturbed layers and the cross-modal switch per batch entry: a DiT streamed from the
host or a disk cache crosses to the device once a step instead of three times (LTX-2 19B on the v5e: 55.6 s a
step, 7% MFU, with three calls). The call equals the passes run one by one (``runtime.batch_branches=false``)
within float32 rounding; the pipeline parity of the four-pass recipe is tests/test_ltx2_e2e.py."""

from __future__ import annotations

import json
import os

import numpy as np

from vidax_core import cli
from vidax_core.testing.parity import rel_l2

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs", "ltx2_demo.yaml")


def _run(tmp_path, batched: bool):
    name = "one" if batched else "each"
    assert cli.main(["run", DEMO, "sampling.num_steps=2", f"runtime.batch_branches={str(batched).lower()}",
                     f"output.path={tmp_path / name}.mp4", f"output.metrics={tmp_path / name}.json",
                     f"output.save_latents={tmp_path / name}.npz", "--quiet"]) == 0
    metrics = json.loads((tmp_path / f"{name}.json").read_text())
    return metrics["model_calls_per_step"], np.load(tmp_path / f"{name}.npz")


def test_the_four_passes_are_one_model_call(tmp_path):
    calls, together = _run(tmp_path, True)
    assert calls == [["cond", "uncond", "perturbed", "isolated"]]
    calls, apart = _run(tmp_path, False)
    assert calls == [["cond"], ["uncond"], ["perturbed"], ["isolated"]]
    for key in ("video", "audio"):
        assert rel_l2(together[key], apart[key]) < 1e-5, key
