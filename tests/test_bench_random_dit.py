"""``vidax bench --random-dit`` times one random-weight DiT call of every family's architecture, structured text
contexts included (LTX-Video's hidden + mask, HunyuanVideo's hidden + mask + pooled and guidance input,
Kandinsky 5's channel-last latents, hidden + pooled and RoPE-scale input), resident
and streamed from pinned host memory, with FLOPs from the family's count."""

from __future__ import annotations

import argparse
import os

import pytest

from vidax_core.bench import random_dit

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
DEMOS = {"wan": "demo.yaml", "cosmos": "cosmos_demo.yaml", "cogvideox": "cogvideox_demo.yaml",
         "ltx": "ltx_demo.yaml", "hunyuan": "hunyuan_demo.yaml", "kandinsky": "kandinsky_demo.yaml",
         "skyreels": "skyreels_demo.yaml", "helios": "helios_demo.yaml"}
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.max_sequence_length=16"]


STREAMED = ("ltx", "hunyuan")  # one block group, and two groups (double- then single-stream) streamed in turn


@pytest.mark.parametrize("family", list(DEMOS))
def test_every_family_runs_resident_and_streamed(family):
    args = argparse.Namespace(config=os.path.join(CONFIGS, DEMOS[family]), overrides=SMALL, batch=2,
                              random_blocks=2, attention="xla", repeats=1,
                              offload="1" if family in STREAMED else None)
    rep = random_dit.bench(args)
    assert rep["flops_per_call"] > 0
    (row,) = rep["rows"]
    assert "error" not in row, row.get("error")
    assert row["call_s"] > 0 and row["attention_calls"]
    if family not in STREAMED:
        return
    streamed = row["offload"][0]
    assert streamed["host_memory"] == "pinned_host" and streamed["chunks"] == 2 * len(rep["blocks"])
    assert 0.0 <= streamed["hidden_fraction"] <= 1.0 and streamed["h2d_s_per_chunk"] > 0
