"""SkyReels-V2's rows of the bad-input table: each mistake is exit code 2 and one `error:` line saying what to use
instead, before any weight loads (vidax_core.testing.cli.assert_refused)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import assert_refused

DF = ["model.id=skyreels-v2-df-1.3b-540p", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
      "sampling.width=32", "sampling.num_steps=2"]
T2V = ["model.id=skyreels-v2-t2v-14b-540p", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
       "sampling.width=32"]
I2V = ["model.id=skyreels-v2-i2v-14b-540p", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
       "sampling.width=32", "sampling.num_frames=9"]


def _npz(path, **arrays):
    np.savez(path, **{k: np.zeros(s, np.float32) for k, s in arrays.items()})
    return f"sampling.initial_noise={path}"


CASES = [
    ("frames", lambda t: DF + ["sampling.num_frames=20"], "must be 4k+1"),
    ("size", lambda t: DF + ["sampling.height=40"], "multiple of 16"),
    ("long-without-overlap", lambda t: DF + ["sampling.num_frames=121"], "options.overlap_history is required"),
    ("overlap-too-long", lambda t: DF + ["sampling.num_frames=121", "options.overlap_history=97"],
     "shorter than options.base_num_frames"),
    ("base-frames", lambda t: DF + ["options.base_num_frames=96"], "options.base_num_frames must be 4k+1"),
    ("causal-blocks-do-not-divide", lambda t: DF + ["sampling.num_frames=21", "options.causal_block_size=4"],
     "must divide every window's latent frames"),
    ("negative-ar-step", lambda t: DF + ["options.ar_step=-1"], "options.ar_step must be 0"),
    # issue 51: options.addnoise_condition=1e308 (the prefix re-noise overflows; the check was only >= 0)
    ("addnoise-condition-1e308", lambda t: DF + ["options.addnoise_condition=1e308"],
     "options.addnoise_condition must be from 0 to 1000"),
    ("addnoise-condition-past-a-timestep", lambda t: DF + ["options.addnoise_condition=1001"],
     "options.addnoise_condition must be from 0 to 1000"),
    # issue 51: a 2,728-character error line (833 window sizes): each distinct size once, with its count
    ("causal-blocks-of-833-windows", lambda t: DF + ["sampling.num_frames=10001", "options.base_num_frames=17",
                                                     "options.overlap_history=1", "options.causal_block_size=2"],
     "windows have 5 (x625): change"),
    # issue 51: docs/models/skyreels.md named built-ins tiny-random-t2v / -i2v that were refused
    ("builtin-of-another-kind", lambda t: DF + ["model.checkpoint=builtin:tiny-random-t2v"],
     "the built-in of a model that has one is builtin:tiny-random"),
    ("df-option-on-t2v", lambda t: T2V + ["options.ar_step=5"], "unknown config key options.ar_step"),
    ("noise-npy-for-windows", lambda t: DF + ["sampling.num_frames=17", "options.base_num_frames=9",
                                              "options.overlap_history=5", _np(t / "n.npy", (1, 4, 3, 4, 4))],
     "draws noise 3 times"),
    ("noise-npy-wrong-shape", lambda t: DF + ["sampling.num_frames=9", _np(t / "n.npy", (1, 4, 2, 4, 4))],
     "n.npy has shape (1, 4, 2, 4, 4), this run needs (1, 4, 3, 4, 4)"),
    ("noise-npz-missing-draw", lambda t: DF + ["sampling.num_frames=33", "options.base_num_frames=17",
                                               "options.overlap_history=5", "options.addnoise_condition=20",
                                               _npz(t / "n.npz", noise_0=(1, 4, 5, 4, 4))], "missing noise_1"),
    ("noise-npz-wrong-shape", lambda t: DF + ["sampling.num_frames=9", _npz(t / "n.npz", noise_0=(1, 4, 2, 4, 4))],
     "noise_0 has shape"),
    ("i2v-checkpoint", lambda t: DF + [_i2v_checkpoint(t / "c")], "an image-to-video denoiser"),
    ("cache-with-windows", lambda t: DF + ["sampling.num_frames=9", "cache={method: first_block, threshold: 0.1}"],
     "does not apply to skyreels-v2-df-1.3b-540p"),
    ("i2v-without-image", lambda t: I2V, "makes video from an image: set `image:"),
    ("image-on-t2v", lambda t: T2V + [f"image={_image(t)}"], "takes no image (tasks: t2v)"),
    ("t2v-checkpoint-as-i2v", lambda t: I2V + [f"image={_image(t)}", "model.checkpoint=" + _t2v_builtin()],
     "needs an image-to-video denoiser (12 input channels"),
]


def _image(folder):
    from vidax_core.testing.reference import write_test_image

    return write_test_image(folder / "image.png")


def _t2v_builtin():
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    return plugins.call("builtin_checkpoint", plugins.registry.get("skyreels-v2-t2v-14b-540p"), name="tiny-random")


def _i2v_checkpoint(folder):
    import json

    from vidax_core.testing.assets import writable_asset

    writable_asset("vidax_skyreels", folder)
    path = folder / "transformer" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "in_channels": 12}))
    return f"model.checkpoint={folder}"


def _np(path, shape):
    np.save(path, np.zeros(shape, np.float32))
    return f"sampling.initial_noise={path}"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, setup, fragment = case
    print(f"{name}: {assert_refused(setup(tmp_path), fragment, capsys, monkeypatch)}")


def test_the_documented_builtin_names_are_taken(capsys):
    """docs/models/skyreels.md names the text- and image-to-video ids' built-ins tiny-random-t2v and
    tiny-random-i2v: both names, and tiny-random, open those ids' own tiny pipelines."""
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    for model_id, kind in (("skyreels-v2-t2v-14b-540p", "t2v"), ("skyreels-v2-i2v-14b-540p", "i2v")):
        spec = plugins.registry.get(model_id)
        for name in ("tiny-random", f"tiny-random-{kind}"):
            folder = plugins.call("builtin_checkpoint", spec, name=name)
            assert folder is not None and folder.endswith(f"tiny-random-{kind}"), (model_id, name, folder)
    import os

    doc = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "models", "skyreels.md")
    with open(doc) as f:
        text = " ".join(f.read().split())
    assert "(packaged as `tiny-random-t2v` and `tiny-random-i2v`, which those ids also take by name)" in text
