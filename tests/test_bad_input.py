"""Every mistake a user can make ends with exit code 2 and ONE `error:` line that says what to change.

The CLI runs in-process (`vidax_core.cli.main`) so the table stays fast; tests/test_cli.py covers the same
contract through a real subprocess.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from vidax_core import cli

MODEL = "model.id=wan2.1-t2v-1.3b"
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]


@pytest.fixture()
def ckpt(tmp_path):
    """A writable copy of the built-in tiny checkpoint (diffusers layout)."""
    import vidax_wan

    src = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    dst = tmp_path / "ckpt"
    shutil.copytree(src, dst)
    return dst


def _truncate(path, keep):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep])


def _set_json(path, **changes):
    data = json.loads(open(path).read())
    data.update(changes)
    open(path, "w").write(json.dumps(data))


def _drop_tensor(path, name):
    from vidax_core.io.safetensors import SafetensorsFile, save_file

    tensors = {k: np.array(v) for k, v in SafetensorsFile(str(path)).items() if k != name}
    save_file(tensors, str(path))


def _add_tensor(path, name, value):
    from vidax_core.io.safetensors import SafetensorsFile, save_file

    tensors = {k: np.array(v) for k, v in SafetensorsFile(str(path)).items()}
    tensors[name] = value
    save_file(tensors, str(path))


DIT = "transformer/diffusion_pytorch_model.safetensors"

# (case id, setup(tmp, ckpt) -> extra args, expected fragment of the error line)
CASES = [
    ("yaml-syntax", lambda t, c: [_w(t / "bad.yaml", "model: {id: [unclosed\n"), str(t / "bad.yaml")], "not valid"),
    ("config-missing", lambda t, c: [str(t / "nope.yaml")], "does not exist"),
    ("yaml-not-mapping", lambda t, c: [_w(t / "list.yaml", "- a\n- b\n"), str(t / "list.yaml")], "mapping"),
    ("unknown-key", lambda t, c: [MODEL, "sampling.stepz=3"], "unknown config key sampling.stepz"),
    ("unknown-top-key", lambda t, c: [MODEL, "promt=hi"], "did you mean prompt"),
    ("not-key-value", lambda t, c: [MODEL, "justaword"], "key=value"),
    ("wrong-type-int", lambda t, c: [MODEL, "sampling.num_steps=many"], "sampling.num_steps must be an integer"),
    ("wrong-type-float-for-int", lambda t, c: [MODEL, "sampling.num_frames=5.5"], "sampling.num_frames must be an integer"),
    ("wrong-type-bool", lambda t, c: [MODEL, "output.overwrite=maybe"], "output.overwrite must be true/false"),
    ("section-not-mapping", lambda t, c: [MODEL, "sampling=3"], "sampling must be a mapping"),
    ("steps-zero", lambda t, c: [MODEL, "sampling.num_steps=0"], "sampling.num_steps must be at least 1"),
    ("negative-guidance", lambda t, c: [MODEL, "sampling.guidance_scale=-1"], "guidance_scale must be >= 0"),
    ("frames-not-4k+1", lambda t, c: [MODEL, "sampling.num_frames=16"], "use 17"),
    ("height-multiple", lambda t, c: [MODEL, "sampling.height=100"], "sampling.height must be a multiple of 16"),
    ("width-multiple", lambda t, c: [MODEL, "sampling.width=250"], "sampling.width must be a multiple of 16"),
    ("bad-backend", lambda t, c: [MODEL, "attention.backend=fast"], "attention.backend must be one of"),
    ("bad-dtype", lambda t, c: [MODEL, "model.dtype=float8"], "model.dtype must be null or one of"),
    ("unknown-model", lambda t, c: ["model.id=wan2.1-t2v-13b"], "unknown model id"),
    ("no-model", lambda t, c: ["prompt=hi"], "no model chosen"),
    ("image-for-t2v", lambda t, c: [MODEL, "image=cat.png"], "takes no image"),
    ("checkpoint-missing", lambda t, c: [MODEL, f"model.checkpoint={t / 'nowhere'}"] + SMALL, "does not exist"),
    ("checkpoint-is-file", lambda t, c: [MODEL, f"model.checkpoint={c / 'model_index.json'}"] + SMALL, "is a file"),
    ("checkpoint-not-diffusers", lambda t, c: [MODEL, f"model.checkpoint={t}"] + SMALL, "not in diffusers layout"),
    ("component-missing", lambda t, c: [_rm(c / "vae"), MODEL, f"model.checkpoint={c}"] + SMALL, "has no vae/ folder"),
    ("config-json-garbage", lambda t, c: [_w(c / "transformer/config.json", "{oops"), MODEL, f"model.checkpoint={c}"] + SMALL, "not valid JSON"),
    ("safetensors-truncated", lambda t, c: [_truncate(c / DIT, 5000), MODEL, f"model.checkpoint={c}"] + SMALL, "truncated"),
    ("safetensors-garbage", lambda t, c: [_w(c / DIT, "x" * 64), MODEL, f"model.checkpoint={c}"] + SMALL, "corrupt"),
    ("tensor-missing", lambda t, c: [_drop_tensor(c / DIT, "proj_out.bias"), MODEL, f"model.checkpoint={c}"] + SMALL, "1 missing: proj_out/bias"),
    ("tensor-unexpected", lambda t, c: [_add_tensor(c / DIT, "extra.weight", np.zeros(3, np.float32)), MODEL, f"model.checkpoint={c}"] + SMALL, "1 unexpected: extra.weight"),
    ("tensor-misshaped", lambda t, c: [_set_json(c / "transformer/config.json", ffn_dim=40), MODEL, f"model.checkpoint={c}"] + SMALL, "mis-shaped"),
    ("noise-wrong-shape", lambda t, c: [_npy(t / "n.npy", (1, 4, 3, 8, 8)), MODEL, f"model.checkpoint={c}", f"sampling.initial_noise={t / 'n.npy'}"] + SMALL, "has shape (1, 4, 3, 8, 8), this run needs (1, 4, 2, 8, 8)"),
    ("noise-missing", lambda t, c: [MODEL, f"model.checkpoint={c}", f"sampling.initial_noise={t / 'none.npy'}"] + SMALL, "initial_noise"),
    ("noise-not-npy", lambda t, c: [_w(t / "n.npy", "text"), MODEL, f"model.checkpoint={c}", f"sampling.initial_noise={t / 'n.npy'}"] + SMALL, "cannot be read as .npy"),
    ("output-exists", lambda t, c: [_w(t / "o.mp4", "old"), MODEL, f"model.checkpoint={c}", f"output.path={t / 'o.mp4'}"] + SMALL, "already exists"),
    ("output-is-folder", lambda t, c: [MODEL, f"model.checkpoint={c}", f"output.path={t}"] + SMALL, "is a folder"),
    ("output-unwritable", lambda t, c: [MODEL, f"model.checkpoint={c}", f"output.path={_ro(t / 'ro')}/o.mp4"] + SMALL, "cannot write"),
    ("unknown-sampler", lambda t, c: [MODEL, f"model.checkpoint={c}", "sampling.scheduler=warp"] + SMALL, "supported samplers"),
    ("unknown-sampler-option", lambda t, c: [MODEL, f"model.checkpoint={c}", "sampling.scheduler={name: unipc, speed: 2}"] + SMALL, "supported options"),
    ("scheduler-class-unknown", lambda t, c: [_set_json(c / "scheduler/scheduler_config.json", _class_name="MagicScheduler"), MODEL, f"model.checkpoint={c}"] + SMALL, "MagicScheduler"),
    ("mesh-too-few-devices", lambda t, c: [MODEL, f"model.checkpoint={c}", "parallel.tp=2"] + SMALL, "needs 2 devices, only 1 are visible"),
    ("image-missing-for-i2v", lambda t, c: ["model.id=wan2.1-i2v-14b-480p", f"model.checkpoint={c}"] + SMALL, "is an image-to-video model: set image"),
    ("image-unreadable", lambda t, c: [_w(t / "bad.png", "not a png"), "model.id=wan2.1-i2v-14b-480p", f"model.checkpoint={c}", f"image={t / 'bad.png'}"] + SMALL, "cannot read image"),
    ("tokenizer-missing", lambda t, c: [_rm(c / "tokenizer/tokenizer.json"), MODEL, f"model.checkpoint={c}"] + SMALL, "tokenizer"),
]


def _w(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return None


def _rm(path):
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    return None


def _npy(path, shape):
    np.save(path, np.zeros(shape, np.float32))
    return None


def _ro(path):
    path.mkdir()
    os.chmod(path, 0o500)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, ckpt, capsys, monkeypatch):
    name, setup, fragment = case
    if name == "output-unwritable" and os.geteuid() == 0:
        # root ignores directory permissions; a path under a regular file can never be created
        setup = lambda t, c: [_w(t / "f", "x"), MODEL, f"model.checkpoint={c}", f"output.path={t / 'f' / 'o.mp4'}"] + SMALL  # noqa: E731
    monkeypatch.chdir(tmp_path)
    args = [a for a in setup(tmp_path, ckpt) if a is not None]
    if args and args[0].endswith((".yaml", ".yml")):
        argv = ["run", args[0], *args[1:]]
    else:
        argv = ["run", *args]
    argv += [f"runtime.compilation_cache_dir={tmp_path / 'jc'}"] if any(a.startswith("model.id") for a in argv) else []
    code = cli.main(argv + ["--quiet"])
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert fragment in err[0], err[0]
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
    print(f"{name}: {err[0]}")
