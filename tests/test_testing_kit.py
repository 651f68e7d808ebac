"""The shipped test kit: its core parts import without PyTorch or JAX (a third-party plugin may use them with
neither), and its parity helpers measure what they say."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vidax_core.testing import parity

CORE_PARTS = ["vidax_core.testing", "vidax_core.testing.parity", "vidax_core.testing.cli", "vidax_core.testing.devices",
              "vidax_core.testing.runs", "vidax_core.testing.checks", "vidax_core.testing.cache",
              "vidax_core.testing.reference", "vidax_core.testing.tokenizers", "vidax_core.testing.tiny.wan"]


def test_core_parts_import_without_torch_or_jax():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in CORE_PARTS)
            + "print(sorted(m for m in ('torch', 'jax', 'diffusers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_fp32_error_is_the_one_ulp_sensitivity():
    """For y = 1e4 * x the output moves by 1e4 x one ulp of x; integer inputs and nested containers pass through."""
    x = np.full(4, 1.0, np.float32)
    err = parity.fp32_error(lambda d: 1e4 * d["x"].astype(np.float64) + d["n"], {"x": x, "n": np.arange(4)})
    assert err == pytest.approx(1e4 * float(np.spacing(np.float32(1.0))), rel=0.51)


def test_assert_fp32_parity_passes_within_and_fails_beyond_the_bound():
    ref64 = np.linspace(-1, 1, 64)
    ref32 = ref64 + 1e-7
    parity.assert_fp32_parity("within", ref64 + 3e-7, ref32, ref64, vidax_err=1e-7)  # 3e-7 <= 4 x 2e-7
    with pytest.raises(AssertionError):
        parity.assert_fp32_parity("beyond", ref64 + 1e-5, ref32, ref64, vidax_err=1e-7)
    with pytest.raises(AssertionError, match="did not run in float64"):
        parity.assert_fp32_parity("no fp64", ref64, ref64, ref64, vidax_err=1e-7)


def test_overrides_spell_yaml_values():
    from vidax_core.testing.cli import overrides

    assert overrides(sampling={"num_steps": 2, "scheduler": None}, options={"flag": True, "tiles": {"a": 1}}) == [
        "sampling.num_steps=2", "sampling.scheduler=null", "options.flag=true", "options.tiles={a: 1}"]


def test_overrides_strings_read_back_as_the_same_strings():
    """An empty string (YAML's null when unquoted), ``"3"`` and ``"true"`` under a key of no text type are quoted; a
    text key (``negative_prompt``) takes its string verbatim, empty included."""
    from vidax_core.config import RunConfig
    from vidax_core.config.parse import parse_overrides
    from vidax_core.testing.cli import overrides, run_args

    strings = {"empty": "", "digits": "3", "word": "true", "colon": "a: b", "plain": "lanczos", "list": ["", "x"]}
    assert parse_overrides(overrides(options=strings), RunConfig)["options"] == strings
    assert overrides(sampling={"scheduler": "unipc"}) == ["sampling.scheduler=unipc"]
    assert parse_overrides(run_args("m", "c", "p", ""), RunConfig)["negative_prompt"] == ""


def test_family_kit_samples_as_many_noise_moves_as_the_class_asks():
    """Each moved one-device run gets its own random move (seed = its place), and the layout tolerance follows the
    largest move: a model whose float32 sensitivity is a count of flipped bfloat16 roundings needs several samples."""
    from vidax_core.testing.family import FamilyTests
    from vidax_core.testing.runs import _one_ulp_noise

    class Four(FamilyTests):
        model_id = "x"
        noise_moves = 4

    assert FamilyTests.moved_names() == ("single_moved",)
    assert Four.moved_names() == ("single_moved", "single_moved_2", "single_moved_3", "single_moved_4")
    runs = {"single_moved": {"rel": 2e-7}, "single_moved_2": {"rel": 5e-5}, "single_moved_3": {"rel": 3e-7},
            "single_moved_4": {"rel": 1e-6}}
    assert Four().layout_tolerance(runs) == pytest.approx(5e-4)
    assert FamilyTests().layout_tolerance(runs) == pytest.approx(2e-6)
    base = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    moves = [_one_ulp_noise(lambda key, shapes: base, seed)(None, None) for seed in range(3)]
    up, down = np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))
    assert all(np.all((m == up) | (m == down)) for m in moves)  # one ulp each
    assert not np.array_equal(moves[0], moves[1]) and not np.array_equal(moves[1], moves[2])
