"""Run the real ``vidax`` command line in a subprocess, as a user would (the venv's console script), and the
end-to-end run every family's parity test makes (:func:`run_e2e`, its arguments from :func:`run_args`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np


def vidax_command() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]


def vidax(*args: str, cwd=None, env: dict | None = None, replace_env: bool = False, timeout: int = 600):
    """``vidax ARGS`` on the CPU with full-precision matmuls; ``env`` adds to (or replaces) the environment."""
    base = {} if replace_env else dict(os.environ, JAX_PLATFORMS="cpu", JAX_DEFAULT_MATMUL_PRECISION="highest")
    return subprocess.run(vidax_command() + [str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env={**base, **(env or {})}, timeout=timeout)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        return _string(v)
    return str(v)


def _string(text: str) -> str:
    """``text`` as a YAML value that reads back as that string: quoted where plain YAML would read something else
    (an empty string reads as null, ``"3"`` as a number, ``"true"`` as a boolean)."""
    import json

    from vidax_core.config.parse import parse_value

    try:
        same = parse_value("value", text, None) == text
    except Exception:  # noqa: BLE001 - a string YAML cannot read plainly (``a: b``) is quoted too
        same = False
    return text if same else json.dumps(text)


def overrides(**sections: Mapping[str, Any]) -> list[str]:
    """``overrides(sampling={"num_steps": 2}, options={"use_dynamic_cfg": True, "label": ""})`` ->
    ``["sampling.num_steps=2", "options.use_dynamic_cfg=true", 'options.label=""']``: booleans, None, lists and
    mappings in YAML spelling, and each value as the config reads it back: a key whose type is text (``prompt``,
    ``negative_prompt``) takes its string verbatim, any other key a string YAML reads as that same string (an empty
    one, or one YAML would read as a number, a boolean or null, is quoted)."""
    from vidax_core.config import RunConfig
    from vidax_core.config.parse import field_type, is_text_type

    out = []
    for section, keys in sections.items():
        for k, v in keys.items():
            key = f"{section}.{k}"
            out.append(f"{key}={v if isinstance(v, str) and is_text_type(field_type(RunConfig, key)) else _value(v)}")
    return out


def run_args(model_id: str, checkpoint: str | os.PathLike, prompt: str, negative_prompt: str | None = None, *,
             image: str | os.PathLike | None = None, **sections: Mapping[str, Any]) -> list[str]:
    """The ``vidax run`` arguments of an end-to-end case: model id and checkpoint, the prompts, the conditioning
    image when given, then ``sections`` as :func:`overrides` spells them."""
    args = [f"model.id={model_id}", f"model.checkpoint={checkpoint}", f"prompt={prompt}"]
    if negative_prompt is not None:
        args.append(f"negative_prompt={negative_prompt}")
    if image is not None:
        args.append(f"image={image}")
    return args + overrides(**sections)


def plugin_env(folder: str | os.PathLike, name: str, target: str) -> dict:
    """The environment that lets the CLI find a plugin object: nothing when the ``vidax`` entry point ``name`` is
    installed, else a minimal distribution under ``folder`` declaring ``name = target``, put first on PYTHONPATH (an
    environment installed before the entry point was added still runs the new plugin's tests)."""
    from importlib import metadata

    if any(ep.name == name for ep in metadata.entry_points(group="vidax")):
        return {}
    folder = Path(folder)
    info = folder / f"vidax_{name}_entry-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vidax-{name}-entry\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[vidax]\n{name} = {target}\n")
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


@dataclass
class E2ERun:
    latents: Any  # an array, or {stream: array} for multi-stream models
    frames: np.ndarray
    metrics: dict
    stderr: str
    audio: np.ndarray | None = None


#: model families this process has already run end to end in a subprocess (:func:`run_e2e`)
_RAN_IN_SUBPROCESS: set[str] = set()


def _model_of(args: Sequence[str]) -> str | None:
    ids = [a.split("=", 1)[1] for a in args if a.startswith("model.id=")]
    return ids[-1] if ids else next((a for a in args if a.endswith((".yaml", ".yml"))), None)


def _family_of(model: str) -> str:
    """The family of model id ``model`` (its own name where the registry does not know it, or it is a config)."""
    from vidax_core.plugins import get_plugins

    return next((s.family for s in get_plugins().registry if s.id == model), model)


def run_e2e(folder: str | os.PathLike, *args: str, noise: Any = None, tag: str = "run",
            env: dict | None = None, timeout: int = 600, audio: bool = False,
            in_process: bool | None = None) -> E2ERun:
    """``vidax run ARGS`` writing its latents, frames and metrics under ``folder`` (and reading ``noise`` as
    ``sampling.initial_noise`` when given: an array, or ``{stream: array}`` written as an .npz); with ``audio`` the
    float waveform too (``output.save_audio``); assert it succeeded and return what it saved. ``in_process``: the
    same command line through ``vidax_core.cli.main`` in this process (no interpreter and JAX start-up per case,
    the installed plugins, this process's JAX settings); None: a family's first run in this process is a real
    ``vidax`` process, as a user runs it, and its later ones (any of its model ids, with no environment of their
    own) run in-process."""
    model = _model_of(args)
    family = None if model is None else _family_of(model)
    if in_process is None:
        in_process = not env and family is not None and family in _RAN_IN_SUBPROCESS
    if not in_process and family is not None:
        _RAN_IN_SUBPROCESS.add(family)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # an archive whatever the model: one stream is saved in it as ``latents`` (runner.outputs.save_latents)
    out = {k: folder / f"{tag}.{k}" for k in ("mp4", "lat.npz", "frames.npy", "json", "audio.npy")}
    extra = [f"output.path={out['mp4']}", f"output.save_latents={out['lat.npz']}",
             f"output.save_frames={out['frames.npy']}", f"output.metrics={out['json']}", "output.overwrite=true"]
    if audio:
        extra.append(f"output.save_audio={out['audio.npy']}")
    if isinstance(noise, Mapping):
        np.savez(folder / f"{tag}.noise.npz", **{k: np.asarray(v, np.float32) for k, v in noise.items()})
        extra.append(f"sampling.initial_noise={folder / f'{tag}.noise.npz'}")
    elif noise is not None:
        np.save(folder / f"{tag}.noise.npy", np.asarray(noise, np.float32))
        extra.append(f"sampling.initial_noise={folder / f'{tag}.noise.npy'}")
    if in_process:
        proc = _in_process(["run", *args, *extra, "--quiet"], folder)
    else:
        proc = vidax("run", *args, *extra, "--quiet", cwd=folder, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    metrics = json.loads(out["json"].read_text())
    if not in_process:  # a process of its own measures what starting the device runtime took, before anything else
        assert metrics["runtime_host_mb"] is not None, "the device runtime started before vidax measured it"
    with np.load(out["lat.npz"]) as saved:
        latents = saved["latents"] if saved.files == ["latents"] else {k: saved[k] for k in saved.files}
    return E2ERun(latents, np.load(out["frames.npy"]), metrics, proc.stderr,
                  np.load(out["audio.npy"]) if audio else None)


def _in_process(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    import contextlib
    import io

    from vidax_core import cli

    err, here = io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(err):
            code = cli.main([str(a) for a in argv])
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(argv, code, "", err.getvalue())


def assert_refused(args: list[str], fragment: str, capsys: Any, monkeypatch: Any) -> str:
    """``vidax run ARGS`` in-process (as the bad-input table runs it) must stop before the denoising loop with exit
    code 2 and one ``error:`` line containing ``fragment``; returns that line. ``capsys`` / ``monkeypatch`` are the
    calling test's pytest fixtures."""
    from vidax_core import cli
    from vidax_core.runner import loaded

    def refuse(*_args: Any, **_kwargs: Any):
        raise RuntimeError("reached sampling: this input was not refused before the denoising loop")

    monkeypatch.setattr(loaded, "sample_pass", refuse)  # a chunked run's windows too
    code = cli.main(["run", *args, "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert fragment in err[0], err[0]
    return err[0]
