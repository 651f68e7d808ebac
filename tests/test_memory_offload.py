"""Big checkpoints within host memory: a Wan2.1-14B-width checkpoint cut to two blocks, written with
numpy alone (plain fp8 blocks, bf16 rest, as the published 14B is laid out), runs at a tiny size with each
``offload.storage``, and the process's own anonymous memory says what it held.

* ``host``: reading and placing the weights (the ``weights`` phase of the metrics) takes the process up by at most
  1.15x the streamed blocks plus the non-block weights (one host copy: no full converted copy beside the chunks, no
  staging left behind);
* ``disk``: the blocks are read from the file cache when needed, so loading and sampling together hold the
  non-block weights and the two chunks in flight, not the streamed group (here two blocks: both chunks);
* ``resident`` (no offload): loading takes the process up by at most 1.15x the weights it places (on the CPU
  backend the devices' memory is host memory), with no whole host copy held until placement returns;
* all three make the same video (the same weights, streamed from two places or resident).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vidax

CONFIG = str(Path(__file__).resolve().parents[1] / "configs" / "wan21_14b_480p.yaml")

pytestmark = [pytest.mark.xdist_group("memory_offload"), pytest.mark.long]

BLOCKS = 2
RUN = ("sampling.height=64", "sampling.width=64", "sampling.num_frames=1", "sampling.num_steps=1",
       "sampling.max_sequence_length=16", "model.dtype=bfloat16", "offload.enabled=true", "offload.chunk_size=1",
       "output.path=null")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from vidax_core.bench.random_checkpoint import write_random_checkpoint

    out = tmp_path_factory.mktemp("w14") / "ckpt"
    summary = write_random_checkpoint("wan2.1-t2v-14b", str(out), blocks=BLOCKS, weight_dtype="float8_e4m3fn",
                                      log=lambda _m: None)
    assert summary["components"]["transformer"]["bytes"] > 2**30  # two 14B-width blocks in fp8 + bf16 rest
    yield out
    shutil.rmtree(out, ignore_errors=True)  # 1.4 GB of random weights: not kept for the rest of the suite


def _run(ckpt, storage, monkeypatch, tmp_path):
    monkeypatch.setenv("VIDAX_OFFLOAD_CACHE", str(tmp_path / "cache"))
    where = ["offload.enabled=false"] if storage == "resident" else [f"offload.storage={storage}"]
    with vidax.load(CONFIG, f"model.checkpoint={ckpt}", *RUN, *where) as pipe:
        out = pipe()
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    return out.metrics, np.asarray(out.latents)


@pytest.fixture(scope="module")
def runs(ckpt, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        return {s: _run(ckpt, s, mp, tmp_path_factory.mktemp(s)) for s in ("host", "disk", "resident")}
    finally:
        mp.undo()


def test_host_storage_holds_the_blocks_once(runs):
    m, _ = runs["host"]
    off = m["offload"]
    held = (off["host_bytes"] + off["non_block_weight_bytes"]) / 2**20
    load = m["anon_mb_phases"]["weights"]
    growth = load["peak"] - load["start"]
    print(f"host storage: loading grew {growth:.0f} MiB for {held:.0f} MiB of weights ({growth / held:.3f}x)")
    assert off["storage"] == "host" and off["host_bytes"] > 0.6 * 2**30
    assert growth <= 1.15 * held


def _whole_growth(m) -> float:
    """How far the run took the process above where reading the weights started, in MiB."""
    return max(p["peak"] for p in m["anon_mb_phases"].values()) - m["anon_mb_phases"]["weights"]["start"]


def test_disk_storage_does_not_hold_the_blocks(runs):
    m, _ = runs["disk"]
    off = m["offload"]
    chunk = off["chunk_weight_bytes"]["blocks"] / 2**20
    weights = m["anon_mb_phases"]["weights"]
    loaded = weights["peak"] - weights["start"]
    streamed = runs["host"][0]["offload"]["host_bytes"] / 2**20
    disk, host = _whole_growth(m), _whole_growth(runs["host"][0])
    print(f"disk storage: loading grew {loaded:.0f} MiB (non-block {off['non_block_weight_bytes'] / 2**20:.0f} MiB, "
          f"a chunk {chunk:.0f} MiB); the whole run {disk:.0f} MiB against host storage's {host:.0f} MiB, "
          f"{streamed:.0f} MiB of streamed blocks")
    assert off["storage"] == "disk" and off["host_bytes"] == 0
    assert loaded <= off["non_block_weight_bytes"] / 2**20 + 2 * chunk  # the cache is written, not held
    # the blocks live in the page cache; the process holds the two chunks in flight (the one computing and the one
    # read ahead: with two blocks, the whole group), never a copy beside them (tests/test_disk_offload_cache.py)
    assert disk <= host - streamed + 2 * chunk


def test_a_resident_load_holds_no_host_copy(runs):
    m, _ = runs["resident"]
    placed = m["peak_resident_weight_bytes"] / 2**20
    load = m["anon_mb_phases"]["weights"]
    growth = load["peak"] - load["start"]
    print(f"resident: loading grew {growth:.0f} MiB for {placed:.0f} MiB of placed weights ({growth / placed:.3f}x)")
    assert not m["offload"]["enabled"] and placed > 1024
    assert growth <= 1.15 * placed


def test_every_placement_makes_the_same_video(runs):
    np.testing.assert_array_equal(runs["host"][1], runs["disk"][1])
    np.testing.assert_array_equal(runs["host"][1], runs["resident"][1])


UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


@pytest.mark.parametrize("storage", ["host", "disk"])
def test_the_dry_runs_host_line_is_what_a_run_holds(ckpt, tmp_path, storage):
    """``vidax run --dry-run``'s "host memory ~X for the run's parts" (at its peak phase)
    against the same ``vidax run`` in a
    process of its own: its anonymous memory from before loading to its peak, within 10%. Both on the
    CPU backend, where the placement rows (the denoiser, one block's 8-bit kernels converted, the VAE, the
    encoder's phase) are host memory."""
    env = {**os.environ, "VIDAX_OFFLOAD_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    args = [CONFIG, f"model.checkpoint={ckpt}", *RUN, f"offload.storage={storage}"]
    cli = [sys.executable, "-m", "vidax_core.cli", "run", *args]
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, env=env, timeout=300)
    assert dry.returncode == 0, dry.stderr[-2000:]
    value, unit = re.search(r"host memory ~([\d.]+) (\w+) for the run's parts", dry.stdout).groups()
    predicted = float(value) * UNITS[unit] / 2**20
    metrics = tmp_path / "m.json"
    run = subprocess.run([*cli, f"output.metrics={metrics}", "--quiet"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    m = json.loads(metrics.read_text())
    measured = m["peak_anon_mb"] - m["anon_mb_phases"]["call"]["start"]  # from before the call built anything
    print(f"{storage}: the dry run says {predicted:.0f} MiB, the run held {measured:.0f} MiB")
    assert abs(measured - predicted) <= 0.1 * predicted
