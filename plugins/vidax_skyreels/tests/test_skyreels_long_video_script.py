"""benchmarks/skyreels_long_video.py (the accelerator figure's one command) end to end on CPU at tiny size (the built-in
tiny checkpoint): it makes a long video window by window and prints one row per window (the real-shape random
checkpoint it writes otherwise is tests/test_random_checkpoint.py's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "benchmarks", "skyreels_long_video.py")


def test_the_script_runs_at_tiny_size(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path), "--tiny", "--steps", "2", "--seconds", "1"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(rows) == metrics["num_windows"] == 2  # 25 frames: windows of 5 latent frames overlapping by 2
    assert (tmp_path / "video.mp4").stat().st_size > 0 and "projected" in proc.stdout

