"""Two local CPU processes under jax.distributed (gloo) run the tiny Wan model with tp=2 through `vidax run`;
process 0 alone writes the outputs, and its latents equal a single-process run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from vidax_core.testing.tiny.wan import save_tiny_wan
from vidax_core.testing.devices import xla_flags

ARGS = ["model.id=wan2.1-t2v-1.3b", "prompt=a small red fox runs in the snow", "negative_prompt=blurry",
        "sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
        "sampling.guidance_scale=5.0", "sampling.max_sequence_length=16", "runtime.compilation_cache=false"]


def vidax_cli() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.long
def test_two_processes_tp2_match_one(tmp_path):
    ckpt = save_tiny_wan(tmp_path / "ckpt", seed=3, dit={"num_attention_heads": 4, "num_layers": 4})
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).standard_normal((1, 4, 2, 8, 8)).astype(np.float32))
    base_env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_DEFAULT_MATMUL_PRECISION="highest",
                    XLA_FLAGS=xla_flags(1))
    common = vidax_cli() + ["run", *ARGS, f"model.checkpoint={ckpt}", f"sampling.initial_noise={noise}", "--quiet"]

    def outs(tag):
        return [f"output.path={tmp_path / (tag + '.mp4')}", f"output.save_latents={tmp_path / (tag + '.npy')}",
                f"output.metrics={tmp_path / (tag + '.json')}"]

    single = subprocess.run(common + outs("single"), env=base_env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]

    port = free_port()
    procs = []
    for pid in range(2):
        env = dict(base_env, JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
                   JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(pid))
        procs.append(subprocess.Popen(common + outs("multi") + ["parallel.tp=2"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]

    import json

    metrics = json.loads((tmp_path / "multi.json").read_text())
    assert metrics["parallel"] == {"dp": 1, "tp": 2, "sp": 1, "devices": 2, "processes": 2}
    a, b = np.load(tmp_path / "multi.npy"), np.load(tmp_path / "single.npy")
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    assert rel < 1e-5, rel
