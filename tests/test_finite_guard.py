"""The finite-output guard (issue 51, item 2): a run whose latents, frames or audio turn NaN or infinite stops with
one ``error:`` line naming the step (and the window or pass) and what to lower, and writes nothing. Before, such a
run ended rc 0, "wrote ...", with a black mp4 (NaN frames become 0).

The guard reads each step's finiteness flag one step later (the next step's wait has made it ready: no device
round trip is added); :class:`vidax_core.runner.finite.StepGuard` is checked on its own, then whole runs of the tiny
Wan (one pass) and SkyReels-V2 (windows streamed into an mp4) checkpoints with a NaN weight.
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core import cli
from vidax_core.errors import UserError
from vidax_core.io.safetensors import SafetensorsFile, save_file
from vidax_core.runner import finite
from vidax_core.testing.assets import writable_asset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OK, NAN = jnp.zeros((2, 3)), jnp.full((2, 3), jnp.nan)


def test_the_flag_of_a_step_is_read_one_step_later():
    guard = finite.StepGuard("window 2/3", 4)
    guard.after(0, OK)
    guard.after(1, NAN)  # queued, not read yet: no wait on the device here
    with pytest.raises(UserError) as info:
        guard.after(2, OK)
    message = str(info.value)
    assert "at step 2 of 4 (window 2/3)" in message and "nothing was written" in message, message
    assert "lower sampling.guidance_scale" in message and len(message.splitlines()) == 1, message


def test_the_last_step_is_read_when_the_pass_ends():
    guard = finite.StepGuard("sampling", 2)
    guard.after(0, OK)
    guard.after(1, {"video": OK, "audio": jnp.array([jnp.inf])})
    with pytest.raises(UserError, match=r"the latents \(audio\) turned non-finite .* at step 2 of 2"):
        guard.end()


def test_start_latents_and_decoded_outputs_are_checked():
    with pytest.raises(UserError, match="the start latents of window 1/2 are not finite"):
        finite.check_start(np.array([1.0, np.nan], np.float32), "window 1/2")
    frames = np.zeros((1, 2, 4, 4, 3), np.float32)
    finite.check_output(frames, np.zeros((1, 8, 1), np.float32))
    with pytest.raises(UserError, match="the decoded frames of window 3/4 are not finite"):
        finite.check_output(np.where(np.arange(96).reshape(frames.shape) == 5, np.nan, frames), label="window 3/4")
    with pytest.raises(UserError, match="the decoded audio of the video are not finite"):
        finite.check_output(frames, np.full((1, 8, 1), np.inf, np.float32))


def _nan_weight(tmp_path, package, key):
    """A writable copy of ``package``'s tiny checkpoint whose denoiser weight ``key`` is NaN."""
    ckpt = writable_asset(package, tmp_path / "ckpt")
    path = os.path.join(ckpt, "transformer", "diffusion_pytorch_model.safetensors")
    f = SafetensorsFile(path)
    tensors = {k: np.array(f[k]) for k in f}
    del f
    tensors[key] = np.full_like(tensors[key], np.nan)
    save_file(tensors, path)
    return ckpt


RUNS = {
    "plain": ("vidax_wan", os.path.join(ROOT, "configs", "demo.yaml"),
              ["sampling.num_frames=5", "sampling.num_steps=3"], "at step 1 of 3 (sampling)"),
    "windowed": ("vidax_skyreels", os.path.join(ROOT, "configs", "skyreels_demo.yaml"),
                 ["sampling.num_frames=29", "sampling.num_steps=2"], "at step 1 of"),
}


@pytest.mark.parametrize("kind", list(RUNS))
def test_a_run_whose_latents_turn_nan_writes_nothing(tmp_path, capfd, monkeypatch, kind):
    package, config, extra, words = RUNS[kind]
    monkeypatch.chdir(tmp_path)
    ckpt = _nan_weight(tmp_path, package, "proj_out.bias")
    out = tmp_path / "out"
    code = cli.main(["run", config, f"model.checkpoint={ckpt}", "sampling.height=32", "sampling.width=32",
                     "sampling.max_sequence_length=8", *extra, f"output.path={out / 'v.mp4'}",
                     f"output.save_latents={out / 'l.npy'}", f"output.metrics={out / 'm.json'}",
                     f"runtime.compilation_cache_dir={tmp_path / 'jc'}", "--quiet"])
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: the latents turned non-finite"), err
    assert words in err[0], err[0]
    assert not out.exists() or not os.listdir(out), os.listdir(out)  # no mp4, no hidden partial, nothing
