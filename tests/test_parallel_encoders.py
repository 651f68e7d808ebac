"""The T5 and ViT encoder bases placed tensor-parallel (heads/mlp -> tp) on 8 fake CPU devices equal one device.

Runs tests/parallel_scripts/encoders_tp.py in a subprocess (fake devices must be configured before jax is imported).
The tolerance is the unsharded forward's own fp32 noise floor (its output change under a one-ulp parameter nudge).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"

ENCODERS = ["umt5", "t5_v1_1", "clip_text", "clip_vision", "siglip_vision"]
MESHES = ["dp2_tp4"]


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "encoders_tp.py", timeout=600)


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("encoder", ENCODERS)
def test_tensor_parallel_encoder_equals_one_device(out, encoder, mesh):
    r, floor = out[f"{encoder}_{mesh}"], out[f"{encoder}_floor"]
    print(f"{encoder} {mesh}: rel last {r['rel_last']:.2e} pooled {r['rel_pooled']:.2e} "
          f"(floor {floor['rel_last']:.2e} / {floor['rel_pooled']:.2e}), all-reduces {r['all_reduce']}")
    assert r["rel_last"] <= 4 * floor["rel_last"]
    assert r["rel_pooled"] <= 4 * floor["rel_pooled"]
    # really split: q column-parallel over tp, o/out_proj row-parallel, and XLA reduced the partial sums
    assert r["q_spec"] == "P(None, None, 'tp')" and r["o_spec"] == "P(None, 'tp')"
    assert r["all_reduce"] >= 1
