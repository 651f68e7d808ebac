"""Property-based fuzzing of chunked runs (issue 51): the noise files of windowed models (SkyReels-V2 diffusion
forcing, Helios chunks) and stopping a windowed run by a signal at any moment.

* ``windowed noise``: a .npz of draws for the run's windows (or a .npy), members missing, extra, mis-shaped,
  truncated, of other dtypes, and values standard, huge but finite (a draw times 1e37), NaN, infinite or
  subnormal; checked as the run checks it before any weight loads (``check_draws``), then each draw read as the
  windows read it. Every few inputs the check accepts, the whole tiny run is made from that file: it must end
  with exit 0 and finite latents and frames, or one ``error:`` line, and never leave a file behind on failure.
* ``signals`` (campaign only): a windowed ``vidax run`` in its own process stopped at a random moment by SIGTERM,
  SIGINT or SIGKILL: exit 0, 130 or 143 with one line (or killed before the interpreter reached vidax, when
  nothing exists yet), nothing partial left once the next write of that output has run.

The contract per input: tests/test_fuzz_contract.py; a non-finite output counts as an internal error.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import CAMPAIGN, Outcomes, check_contract, fuzz_settings, report_all
from vidax_core import cli, config
from vidax_core.errors import UserError
from vidax_core.io import outputs
from vidax_core.plugins import get_plugins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTCOMES = {name: Outcomes(name) for name in ("windowed noise", "windowed noise runs", "signals")}
RUNS = {  # model -> the tiny windowed run (its draws are planned from it)
    "skyreels": [os.path.join(ROOT, "configs", "skyreels_demo.yaml"), "sampling.height=32", "sampling.width=32",
                 "sampling.num_frames=29", "sampling.num_steps=2", "sampling.max_sequence_length=8"],
    "helios": [os.path.join(ROOT, "configs", "helios_demo.yaml"), "sampling.height=32", "sampling.width=32",
               "sampling.num_frames=18", "sampling.num_steps=2", "options.num_latent_frames_per_chunk=3",
               "sampling.max_sequence_length=8"],
}
FULL_RUNS = int(os.environ.get("VIDAX_FUZZ_WINDOW_RUNS", "6" if CAMPAIGN else "0"))
SIGNAL_RUNS = int(os.environ.get("VIDAX_FUZZ_SIGNAL_RUNS", "4" if CAMPAIGN else "0"))
_runs_done = {"n": 0}
RUN_LIMIT_S = 240.0  # a whole tiny windowed run (compiles included) on a shared CPU


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    report_all(OUTCOMES.values())


_DRAWS: dict[str, list] = {}


def draws_of(model: str) -> list[tuple[int, ...]]:
    """The run's planned draws (from its windows, before any weight)."""
    if model not in _DRAWS:
        from vidax_core.io.run_checkpoint import checkpoint_for_run
        from vidax_core.runner import windowed

        plugins = get_plugins()
        cfg = config.resolve(RUNS[model][0], RUNS[model][1:], plugins.preset_for)
        spec = plugins.registry.get(cfg.model.id)
        ckpt = checkpoint_for_run(cfg, spec, plugins, configs_only=True)
        _DRAWS[model] = windowed._ask(spec, ckpt, cfg, plugins).draws
    return _DRAWS[model]


VALUES = ("normal", "normal", "huge", "nan", "inf", "subnormal", "big-int", "half-max")


def _array(shape, how, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    if how == "huge":
        return a * np.float32(10.0 ** rng.integers(5, 38))
    if how in ("nan", "inf"):
        a.reshape(-1)[rng.integers(0, a.size)] = np.nan if how == "nan" else -np.inf
    elif how == "subnormal":
        return np.full(shape, 1e-45, np.float32)
    elif how == "big-int":
        return np.full(shape, 2**31 - 1, np.int32)
    elif how == "half-max":
        return np.full(shape, 65504, np.float16)
    return a


@st.composite
def noise_archive(draw, model):
    shapes = draws_of(model)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    members = {f"noise_{n}": s for n, s in enumerate(shapes)}
    what = []
    if draw(st.integers(0, 4)) == 0:
        gone = draw(st.sampled_from(sorted(members)))
        members.pop(gone)
        what.append(f"without {gone}")
    if draw(st.integers(0, 5)) == 0:
        members[f"noise_{len(shapes) + draw(st.integers(0, 2))}"] = shapes[0]
        what.append("an extra draw")
    if draw(st.integers(0, 5)) == 0 and members:
        k = draw(st.sampled_from(sorted(members)))
        members[k] = tuple(max(1, v + draw(st.integers(-1, 1))) for v in members[k])
        what.append(f"{k} reshaped")
    values = {k: draw(st.sampled_from(VALUES)) if draw(st.integers(0, 2)) == 0 else "normal" for k in members}
    what += [f"{k} {v}" for k, v in values.items() if v != "normal"]
    arrays = {k: _array(s, values[k], rng) for k, s in members.items()}
    buf = io.BytesIO()
    if draw(st.integers(0, 6)) == 0 and arrays:
        np.save(buf, next(iter(arrays.values())))
        suffix, what = ".npy", what + ["one .npy"]
    else:
        (np.savez_compressed if draw(st.booleans()) else np.savez)(buf, **arrays)
        suffix = ".npz"
    raw = buf.getvalue()
    if draw(st.integers(0, 8)) == 0:
        raw = raw[:draw(st.integers(0, len(raw) - 1))]
        what.append("truncated")
    return raw, suffix, ", ".join(what) or "clean"


def _check(path: str, model: str) -> None:
    from vidax_core.io.draws import Draws, check_draws

    shapes = draws_of(model)
    check_draws(path, shapes)
    draw = Draws(0, path)
    for s in shapes:
        draw(s)


def _run(path: str, model: str, folder: str) -> None:
    """The whole tiny run from the noise file: exit 0 with finite latents and a video, or one line and nothing
    left."""
    out = os.path.join(folder, "out")
    latents = os.path.join(out, "l.npy")
    code = cli.main(["run", *RUNS[model], f"sampling.initial_noise={path}", f"output.path={out}/v.mp4",
                     f"output.save_latents={latents}", "output.metrics=null",
                     f"runtime.compilation_cache_dir={os.path.join(ROOT, 'out', 'fuzz-jc')}", "--quiet"])
    if code == 0:
        lat = np.load(latents)
        if not np.isfinite(lat).all():
            raise AssertionError("exit 0 with non-finite latents")
        from vidax_core.io.video import read_mp4

        if read_mp4(os.path.join(out, "v.mp4")).size == 0:
            raise AssertionError("exit 0 with an empty video")
        return
    left = os.listdir(out) if os.path.isdir(out) else []
    if code != 2 or left:
        raise AssertionError(f"exit {code}, left {left}")
    raise UserError("the run refused it")


@settings(**fuzz_settings(default=8))
@given(data=st.data(), model=st.sampled_from(sorted(RUNS)))
def test_windowed_noise(tmp_path_factory, data, model, capsys):
    raw, suffix, what = data.draw(noise_archive(model))
    folder = str(tmp_path_factory.mktemp("noise"))
    path = os.path.join(folder, "n" + suffix)
    with open(path, "wb") as f:
        f.write(raw)
    label = f"{model}: {what}"
    outcome = check_contract(OUTCOMES["windowed noise"], lambda: _check(path, model), label=label)
    if outcome == "ok" and _runs_done["n"] < FULL_RUNS:
        _runs_done["n"] += 1
        check_contract(OUTCOMES["windowed noise runs"], lambda: _run(path, model, folder), label=label,
                       time_limit=RUN_LIMIT_S)
        capsys.readouterr()


# ---- signals -----------------------------------------------------------------------------------------------

def _partials(folder):
    return sorted(p for p in os.listdir(folder) if ".partial" in p)


def _stop(folder: str, how: int, delay: float) -> None:
    out = os.path.join(folder, "out")
    os.makedirs(out)
    cmd = [sys.executable, "-m", "vidax_core.cli", "run", *RUNS["skyreels"], "sampling.num_steps=6",
           f"output.path={out}/v.mp4", "output.metrics=null",
           f"runtime.compilation_cache_dir={os.path.join(ROOT, 'out', 'fuzz-jc')}", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder,
                            preexec_fn=lambda: (signal.signal(signal.SIGTERM, signal.SIG_DFL),
                                                signal.signal(signal.SIGINT, signal.SIG_DFL)))
    time.sleep(delay)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=180)
    lines = [line for line in err.splitlines() if line.strip()]
    code = proc.returncode
    if how == signal.SIGKILL:
        outputs.save_json(os.path.join(out, "v.mp4"), {})  # the next write of that output sweeps what is left
        if _partials(out):
            raise AssertionError(f"left after the next write: {_partials(out)}")
        return
    if code == 0:
        if set(os.listdir(out)) != {"v.mp4"}:
            raise AssertionError(f"exit 0 and {os.listdir(out)}")
        return
    if os.listdir(out):
        raise AssertionError(f"exit {code}, left {os.listdir(out)}")
    if code == -how:  # stopped while the interpreter started, before vidax could handle it: nothing existed yet
        raise UserError(f"stopped at start ({signal.Signals(how).name})")
    expect = {signal.SIGTERM: 143, signal.SIGINT: 130}[how]
    if code != expect or len(lines) != 1 or not lines[0].startswith("error: "):
        raise AssertionError(f"exit {code}: {lines[-3:]}")
    raise UserError(lines[0])


@pytest.mark.skipif(not SIGNAL_RUNS, reason="stopping whole runs belongs to the `make fuzz` campaign")
@settings(**{**fuzz_settings(default=SIGNAL_RUNS), "max_examples": max(SIGNAL_RUNS, 1)})
@given(how=st.sampled_from([signal.SIGTERM, signal.SIGINT, signal.SIGKILL]), delay=st.floats(0.2, 12.0))
def test_signals(tmp_path_factory, how, delay):
    folder = str(tmp_path_factory.mktemp("signal"))
    label = f"{signal.Signals(how).name} after {delay:.1f} s"
    check_contract(OUTCOMES["signals"], lambda: _stop(folder, how, delay), label=label, time_limit=RUN_LIMIT_S)

