"""``vidax run --dry-run --device NAME``: FLOPs per step, the ideal step time, weights at that device's policy."""

from __future__ import annotations

import os

import re

import pytest

from vidax_core.cli import main

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")

TINY = [DEMO_CONFIG, "sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "--dry-run"]


def _plan(capsys, *extra) -> str:
    assert main(["run", *TINY, *extra]) == 0
    return capsys.readouterr().out


def _gib(text: str) -> float:
    n, unit = re.search(r"per device: ~([\d.]+) (\w+)", text).groups()
    return float(n) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def test_a_gpu_target_sizes_bf16_weights_and_times_the_step(capsys):
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.plugins import get_plugins
    from vidax_wan.dit import WanDiTConfig
    from vidax_wan.flops import dit_flops

    here = _plan(capsys)
    h200 = _plan(capsys, "--device", "h200")
    assert "weights float32" in here and "weights bfloat16 (the device's policy)" in h200
    assert 0.45 < _gib(h200) / _gib(here) < 0.6  # bf16 matmul weights, a few fp32 tables
    plugins = get_plugins()
    spec = plugins.registry.get("wan2.1-t2v-1.3b")
    cfg = WanDiTConfig.from_config(
        Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny-random"), source="b").config("transformer"))
    flops = dit_flops(cfg, 2, (2, 8, 8), 64)  # CFG batch 2, latent 2x8x8, demo text length 64
    line = next(ln for ln in h200.splitlines() if ln.startswith("compute:"))
    assert f"{flops / 1e6:.1f} MFLOP per denoising step (2 guidance branches" in line
    ideal = float(re.search(r"ideal ([\d.e+-]+) s/step on 1 x h200", line).group(1))
    assert ideal == pytest.approx(flops / 989.4e12, rel=1e-2)


def test_an_unknown_device_is_one_line(capsys):
    assert main(["run", *TINY, "--device", "h300"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not in the peak table" in err[0] and "h200" in err[0]
