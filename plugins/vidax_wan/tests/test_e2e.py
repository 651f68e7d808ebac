"""End to end: a tiny diffusers WanPipeline and the real `vidax run` CLI, from the same initial noise.

diffusers (PyTorch, fp32) is the reference; vidax runs in a subprocess exactly as a user would call it, loading the
checkpoint the reference saved with `save_pretrained`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vidax_testing.tiny_wan import build_tiny_wan_pipeline

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"


def vidax_cli() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]


def run_vidax(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_DEFAULT_MATMUL_PRECISION="highest", JAX_PLATFORMS="cpu")
    return subprocess.run(vidax_cli() + args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)


def reference(pipe, noise: np.ndarray, steps: int, height: int, width: int, frames: int):
    import torch

    captured = {}

    def keep(_pipe, i, t, kw):
        captured["latents"] = kw["latents"].detach().clone()
        return kw

    out = pipe(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=height, width=width, num_frames=frames,
        num_inference_steps=steps, guidance_scale=5.0, latents=torch.from_numpy(noise), output_type="np",
        max_sequence_length=16, callback_on_step_end=keep, callback_on_step_end_tensor_inputs=["latents"],
    )
    return captured["latents"].numpy(), np.asarray(out.frames, np.float32)


@pytest.mark.parametrize("scheduler", ["unipc", "euler"])
def test_cli_matches_diffusers(tmp_path, scheduler):
    import torch

    torch.manual_seed(0)
    steps, height, width, frames = 4, 64, 64, 9
    pipe = build_tiny_wan_pipeline(seed=3, flow_shift=3.0, scheduler=scheduler)
    ckpt = tmp_path / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    noise = np.random.default_rng(0).standard_normal((1, 4, 3, height // 8, width // 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)

    ref_latents, ref_frames = reference(pipe, noise, steps, height, width, frames)

    proc = run_vidax(
        [
            "run", f"model.id=wan2.1-t2v-1.3b", f"model.checkpoint={ckpt}", f"prompt={PROMPT}",
            f"negative_prompt={NEGATIVE}", f"sampling.num_steps={steps}", f"sampling.height={height}",
            f"sampling.width={width}", f"sampling.num_frames={frames}", "sampling.guidance_scale=5.0",
            "sampling.max_sequence_length=16", f"sampling.initial_noise={tmp_path / 'noise.npy'}",
            f"output.path={tmp_path / 'out.mp4'}", f"output.save_latents={tmp_path / 'lat.npy'}",
            f"output.save_frames={tmp_path / 'frames.npy'}", f"output.metrics={tmp_path / 'm.json'}",
            f"runtime.compilation_cache_dir={tmp_path / 'jaxcache'}", "--quiet",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    latents = np.load(tmp_path / "lat.npy")
    got_frames = np.load(tmp_path / "frames.npy")
    rel = float(np.linalg.norm(latents - ref_latents) / np.linalg.norm(ref_latents))
    frame_err = float(np.abs(got_frames - ref_frames).max())
    print(f"[{scheduler}] latents rel err {rel:.3e} max abs {np.abs(latents - ref_latents).max():.3e}; frames max abs {frame_err:.3e}")
    assert latents.shape == ref_latents.shape
    assert rel <= 1e-4
    assert got_frames.shape == ref_frames.shape == (1, frames, height, width, 3)
    assert frame_err <= 1e-3
    assert os.path.getsize(tmp_path / "out.mp4") > 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    for key in ("load_s", "compile_s", "per_step_s", "decode_s", "total_s", "peak_rss_mb"):
        assert metrics[key] >= 0
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
