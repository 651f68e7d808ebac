"""Masked Ulysses attention (key padding, lengths, segment ids, causal, the Cosmos3 mixture-of-transformers mask)
under SP x TP on 8 fake CPU devices equals a dense float64 reference, and stays free of (Sq, Sk) arrays at 720p.

Runs tests/parallel_scripts/attention_masks.py in a subprocess (fake devices must be configured before jax is
imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"

CASES = ("self_causal_mask", "self_prefix_mask", "self_segments_lengths", "cross_lengths_segments",
         "joint_text_mask", "joint_mot", "joint_causal")


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "attention_masks.py", timeout=600)


@pytest.mark.parametrize("backend", ["xla", "blockwise"])
@pytest.mark.parametrize("mesh", ["dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2"])
def test_masked_ulysses_matches_dense_reference(out, mesh, backend):
    r = out[f"masks_{mesh}"]
    for case in CASES:
        c = r[f"{backend}/{case}"]
        # within a few times the fp32 reference's own error; the mask moves the result by far more than that
        assert c["err"] < 10 * c["noise"], (case, c)
        assert c["unmasked"] > 0.1, (case, c)
        assert "'sp'" in c["spec"], (case, c)  # outputs stay sequence-sharded


@pytest.mark.parametrize("mesh", ["dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2"])
def test_unmasked_calls_unchanged(out, mesh):
    """The calls the Wan DiT makes (no mask keywords) still equal the dense reference."""
    for backend in ("xla", "blockwise"):
        for case in ("self_plain", "cross_plain", "joint_plain"):
            c = out[f"masks_{mesh}"][f"{backend}/{case}"]
            assert c["err"] < 10 * c["noise"], (backend, case, c)


@pytest.mark.parametrize("mesh", ["dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2"])
def test_masked_joint_attention_exchanges_only_the_video(out, mesh):
    assert out[f"masks_{mesh}"]["joint_mot_all_to_all"] == 4  # q, k, v of the video in, its output back


def test_no_masked_ulysses_path_holds_an_sq_by_sk_array_at_720p(out):
    r = out["memory_720p"]
    for case in ("joint_mot_text_mask", "self_causal_mask", "self_segments"):
        assert r[case] == [], (case, r[case])
    assert r["xla_joint_mot_text_mask"], "the check must flag the (S, S) logits of the xla backend"
