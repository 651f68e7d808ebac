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
from vidax_core.testing.assets import writable_asset
from vidax_core.testing.cache import suite_cache_dir

MODEL = "model.id=wan2.1-t2v-1.3b"
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]


@pytest.fixture()
def no_sampling(monkeypatch):
    """Every row is refused before sampling: one that reaches the sampler fails at once instead of generating a
    default-size video (a row whose input became valid would otherwise run for an hour)."""
    from vidax_core.runner import loaded

    def refuse(*args, **kwargs):
        raise RuntimeError("reached sampling: this input was not refused before the denoising loop")

    monkeypatch.setattr(loaded, "sample_pass", refuse)


@pytest.fixture()
def ckpt(tmp_path):
    """A writable copy of the built-in tiny Wan checkpoint (diffusers layout)."""
    return writable_asset("vidax_wan", tmp_path / "ckpt")


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


def _cosmos3_fp8(dst):
    """A copy of the built-in tiny Cosmos3 checkpoint whose transformer config says ModelOpt FP8."""
    writable_asset("vidax_cosmos", dst, name="cosmos3-tiny-random")
    _set_json(os.path.join(dst, "transformer", "config.json"),
              quantization_config={"quant_method": "modelopt", "quant_algo": "FP8"})
    return None


DIT = "transformer/diffusion_pytorch_model.safetensors"

def _cosmos3_fp8_tensors(dst):
    """A copy of the built-in tiny Cosmos3 checkpoint with one weight as ModelOpt exports it (float8_e4m3fn and a
    per-tensor ``weight_scale``) and no quantization config: only the tensors say FP8."""
    import ml_dtypes

    from vidax_core.io.safetensors import SafetensorsFile, save_file

    writable_asset("vidax_cosmos", dst, name="cosmos3-tiny-random")
    path = os.path.join(dst, DIT)
    tensors = {k: np.array(v) for k, v in SafetensorsFile(str(path)).items()}
    key = "layers.0.self_attn.to_q.weight"
    tensors[key] = tensors[key].astype(ml_dtypes.float8_e4m3fn)
    tensors[key + "_scale"] = np.array(0.5, np.float32)
    save_file(tensors, str(path))
    return None


K6 = "model.id=kandinsky6-ti2va-lite model.checkpoint=builtin:tiny-random".split()
SR = "model.id=kandinsky6-vsr model.checkpoint=builtin:tiny-random sampling.height=24 sampling.width=40 " \
     "sampling.num_frames=9".split()


def _k6_no_types(dst):
    """A copy of the built-in tiny Kandinsky 6 checkpoint whose DiT has no token types (a text-to-video DiT)."""
    writable_asset("vidax_kandinsky", dst, name="k6-tiny-random")
    _set_json(os.path.join(dst, "transformer", "config.json"), visual_token_type_num_embeddings=0)
    return dst


# (case id, setup(tmp, ckpt) -> extra args, expected fragment of the error line)
CASES = [
    ("yaml-syntax", lambda t, c: [_w(t / "bad.yaml", "model: {id: [unclosed\n"), str(t / "bad.yaml")], "not valid"),
    ("config-missing", lambda t, c: [str(t / "nope.yaml")], "does not exist"),
    ("yaml-not-mapping", lambda t, c: [_w(t / "list.yaml", "- a\n- b\n"), str(t / "list.yaml")], "mapping"),
    ("unknown-key", lambda t, c: [MODEL, "sampling.stepz=3"], "unknown config key sampling.stepz"),
    ("unknown-top-key", lambda t, c: [MODEL, "promt=hi"], "did you mean prompt"),
    ("not-key-value", lambda t, c: [MODEL, "justaword"], "key=value"),
    ("wrong-type-int", lambda t, c: [MODEL, "sampling.num_steps=many"], "sampling.num_steps must be an integer"),
    ("wrong-type-float-for-int", lambda t, c: [MODEL, "sampling.num_frames=5.5"],
     "sampling.num_frames must be an integer"),
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
    ("config-json-garbage", lambda t, c: [_w(c / "transformer/config.json", "{oops"), MODEL,
                                          f"model.checkpoint={c}"] + SMALL,
     "not valid JSON"),
    ("safetensors-truncated", lambda t, c: [_truncate(c / DIT, 5000), MODEL, f"model.checkpoint={c}"] + SMALL,
     "truncated"),
    ("safetensors-garbage", lambda t, c: [_w(c / DIT, "x" * 64), MODEL, f"model.checkpoint={c}"] + SMALL, "corrupt"),
    ("tensor-missing", lambda t, c: [_drop_tensor(c / DIT, "proj_out.bias"), MODEL, f"model.checkpoint={c}"] + SMALL,
     "1 missing: proj_out/bias"),
    ("tensor-unexpected", lambda t, c: [_add_tensor(c / DIT, "extra.weight", np.zeros(3, np.float32)), MODEL,
                                        f"model.checkpoint={c}"] + SMALL,
     "1 unexpected: extra.weight"),
    ("tensor-misshaped", lambda t, c: [_set_json(c / "transformer/config.json", ffn_dim=40), MODEL,
                                       f"model.checkpoint={c}"] + SMALL,
     "mis-shaped"),
    ("noise-wrong-shape", lambda t, c: [_npy(t / "n.npy", (1, 4, 3, 8, 8)), MODEL, f"model.checkpoint={c}",
                                        f"sampling.initial_noise={t / 'n.npy'}"] + SMALL,
     "has shape (1, 4, 3, 8, 8), this run needs (1, 4, 2, 8, 8)"),
    ("noise-missing", lambda t, c: [MODEL, f"model.checkpoint={c}", f"sampling.initial_noise={t / 'none.npy'}"] + SMALL,
     "initial_noise"),
    ("noise-not-npy", lambda t, c: [_w(t / "n.npy", "text"), MODEL, f"model.checkpoint={c}",
                                    f"sampling.initial_noise={t / 'n.npy'}"] + SMALL,
     "cannot be read as .npy"),
    ("output-exists", lambda t, c: [_w(t / "o.mp4", "old"), MODEL, f"model.checkpoint={c}",
                                    f"output.path={t / 'o.mp4'}"] + SMALL,
     "already exists"),
    ("output-is-folder", lambda t, c: [MODEL, f"model.checkpoint={c}", f"output.path={t}"] + SMALL, "is a folder"),
    ("output-unwritable", lambda t, c: [MODEL, f"model.checkpoint={c}", f"output.path={_ro(t / 'ro')}/o.mp4"] + SMALL,
     "cannot write"),
    ("unknown-sampler", lambda t, c: [MODEL, f"model.checkpoint={c}", "sampling.scheduler=warp"] + SMALL,
     "supported samplers"),
    ("unknown-sampler-option", lambda t, c: [MODEL, f"model.checkpoint={c}",
                                             "sampling.scheduler={name: unipc, speed: 2}"] + SMALL,
     "supported options"),
    ("scheduler-class-unknown", lambda t, c: [_set_json(c / "scheduler/scheduler_config.json",
                                                        _class_name="MagicScheduler"), MODEL,
                                              f"model.checkpoint={c}"] + SMALL,
     "MagicScheduler"),
    ("mesh-too-few-devices", lambda t, c: [MODEL, f"model.checkpoint={c}", "parallel.tp=2"] + SMALL,
     "needs 2 devices, only 1 are visible"),
    ("image-missing-for-i2v", lambda t, c: ["model.id=wan2.1-i2v-14b-480p", f"model.checkpoint={c}"] + SMALL,
     "is an image-to-video model: set image"),
    ("image-unreadable", lambda t, c: [_w(t / "bad.png", "not a png"), "model.id=wan2.1-i2v-14b-480p",
                                       f"model.checkpoint={c}", f"image={t / 'bad.png'}"] + SMALL,
     "cannot read image"),
    ("tokenizer-missing", lambda t, c: [_rm(c / "tokenizer/tokenizer.json"), MODEL, f"model.checkpoint={c}"] + SMALL,
     "tokenizer"),
    # every family's own refusals, before any weight loads (the families' built-in tiny checkpoints)
    ("cosmos-frames", lambda t, c: ["model.id=cosmos-predict2.5-2b", "model.checkpoint=builtin:tiny-random",
                                    "sampling.num_frames=10"], "must be 4k+1 for Cosmos-Predict2.5"),
    ("cosmos-image-and-video", lambda t, c: ["model.id=cosmos-predict2.5-2b", "model.checkpoint=builtin:tiny-random",
                                             _png(t / "a.png"), f"image={t / 'a.png'}", f"video={t / 'a.png'}"],
     "set only one of image: and video:"),
    ("cosmos3-frames", lambda t, c: ["model.id=cosmos3-nano", "model.checkpoint=builtin:tiny-random",
                                     "sampling.num_frames=10"], "must be 4k+1 for cosmos3-nano"),
    ("cosmos3-video-one-frame", lambda t, c: ["model.id=cosmos3-edge", "model.checkpoint=builtin:tiny-random",
                                              _png(t / "a.png"), f"video={t / 'a.png'}", "sampling.num_frames=1"],
     "video-to-video needs sampling.num_frames > 1"),
    ("cosmos3-fp8", lambda t, c: [_cosmos3_fp8(t / "c3"), "model.id=cosmos3-nano", f"model.checkpoint={t / 'c3'}",
                                  "sampling.height=48", "sampling.width=64", "sampling.num_frames=9"],
     "ModelOpt FP8 transformer weights"),
    ("cosmos3-fp8-tensors", lambda t, c: [_cosmos3_fp8_tensors(t / "c3"), "model.id=cosmos3-nano",
                                          f"model.checkpoint={t / 'c3'}", "sampling.height=48", "sampling.width=64",
                                          "sampling.num_frames=9", "sampling.num_steps=1"],
     "ModelOpt FP8 transformer weights (1 float8 tensors"),
    ("ltx-frames", lambda t, c: ["model.id=ltx-video-2b-0.9.8-distilled", "model.checkpoint=builtin:tiny-random",
                                 "sampling.num_frames=10"], "must be 8k+1 for LTX-Video"),
    ("ltx-height", lambda t, c: ["model.id=ltx-video-13b-0.9.8-dev", "model.checkpoint=builtin:tiny-random",
                                 "options.multiscale=false", "sampling.height=500"], "use 480"),
    ("ltx-multiscale-too-small", lambda t, c: ["model.id=ltx-video-13b-0.9.8-dev",
                                               "model.checkpoint=builtin:tiny-random",
                                               "sampling.height=40"], "below the VAE's 32 pixels"),
    ("ltx-condition-latents", lambda t, c: ["model.id=ltx-video-13b-0.9.8-dev", "model.checkpoint=builtin:tiny-random",
                                            "options.multiscale=false", _npy(t / "z.npy", (1, 8, 3, 4, 4)),
                                            f"sampling.initial_noise={t / 'z.npy'}"],
     "used only with options.denoise_strength < 1"),
    ("ltx2-frames", lambda t, c: ["model.id=ltx-2-19b-dev", "model.checkpoint=builtin:tiny-random",
                                  "sampling.num_frames=10"], "must be 8k+1 for LTX-2.x"),
    ("ltx2-no-frames", lambda t, c: ["model.id=ltx-2.5-22b-dev", "model.checkpoint=builtin:tiny-random"],
     "sampling.num_frames is not set"),
    ("ltx2-stg-blocks", lambda t, c: ["model.id=ltx-2-19b-dev", "model.checkpoint=builtin:tiny-random",
                                      "sampling.num_frames=9", "sampling.height=64", "sampling.width=64"],
     "spatio_temporal_guidance_blocks [29] are not blocks of this DiT"),
    ("ltx2-one-stream-noise", lambda t, c: ["model.id=ltx-2-19b-dev", "model.checkpoint=builtin:tiny-random",
                                            "sampling.num_frames=9", "sampling.height=64", "sampling.width=64",
                                            "options.spatio_temporal_guidance_blocks=[1]",
                                            _npy(t / "z.npy", (1, 8, 2, 2, 2)),
                                            f"sampling.initial_noise={t / 'z.npy'}"],
     ".npz"),
    ("ltx2-video-input", lambda t, c: ["model.id=ltx-2-19b-dev", "model.checkpoint=builtin:tiny-random",
                                       _png(t / "a.png"), f"video={t / 'a.png'}"], "not on a video"),
    ("ltx2-no-diffusion-decoder", lambda t, c: ["model.id=ltx-2.5-22b-dev", "model.checkpoint=builtin:tiny-random",
                                                "sampling.num_frames=9", "options.video_decoder=diffusion"],
     "has no diffusion_decoder/ folder"),
    ("ltx2-diffusion-decode-timestep", lambda t, c: ["model.id=ltx-2.5-22b-dev", "model.checkpoint=builtin:tiny-random",
                                                     "sampling.num_frames=9", "options.video_decoder=diffusion",
                                                     "options.decode_timestep=0.05"],
     "the diffusion decoder (options.video_decoder=diffusion) draws its own noise"),
    ("ltx2-diffusion-decoder-tiling", lambda t, c: ["model.id=ltx-2.5-22b-dev", "model.checkpoint=builtin:tiny-random",
                                                    "sampling.num_frames=9", "options.video_decoder=diffusion",
                                                    "vae.tiling=true"],
     "its tiled decode is not implemented"),
    ("ltx2-video-decoder-name", lambda t, c: ["model.id=ltx-2.5-22b-dev", "model.checkpoint=builtin:tiny-random",
                                              "sampling.num_frames=9", "options.video_decoder=natten"],
     "options.video_decoder must be one of vae, diffusion"),
    ("ltx2-image-crf", lambda t, c: ["model.id=ltx-2-19b-dev", "model.checkpoint=builtin:tiny-random",
                                     _png(t / "a.png"), f"image={t / 'a.png'}", "options.image_crf=60"],
     "options.image_crf must be from 0"),
    ("hunyuan-t2v-image", lambda t, c: ["model.id=hunyuanvideo-t2v-13b", "model.checkpoint=builtin:tiny-random",
                                        _png(t / "a.png"), f"image={t / 'a.png'}"], "use hunyuanvideo-i2v-13b"),
    ("hunyuan-i2v-no-image", lambda t, c: ["model.id=hunyuanvideo-i2v-13b", "model.checkpoint=builtin:tiny-random"],
     "give the first frame"),
    ("k6-frames", lambda t, c: [*K6, "sampling.num_frames=16"], "use 17"),
    ("k6-size", lambda t, c: [*K6, "sampling.height=100"], "sampling.height must be a multiple of 16"),
    ("k6-video-input", lambda t, c: [*K6, _npy(t / "v.npy", (9, 32, 32, 3)), f"video={t / 'v.npy'}"],
     "takes no video input"),
    ("k6-image-without-token-types", lambda t, c: [
        "model.id=kandinsky6-ti2va-lite", f"model.checkpoint={_k6_no_types(t / 'k6')}", _png(t / "a.png"),
        f"image={t / 'a.png'}", "sampling.height=32", "sampling.width=32", "sampling.num_frames=9"],
     "image-to-video needs 2 token types"),
    ("k6-expand-prompts", lambda t, c: [*K6, "options.expand_prompts=true"], "expand the prompt beforehand"),
    ("k6-sr-unknown-stage", lambda t, c: [*K6, "options.super_resolution=kandinsky6-vsr-8x"],
     "options.super_resolution must be one of"),
    ("k6-sr-stage-wrong-checkpoint", lambda t, c: [*K6, "options.super_resolution=kandinsky6-vsr",
                                                   "options.sr_checkpoint=builtin:tiny-random-nope"],
     "super-resolution (kandinsky6-vsr):"),
    ("k6sr-no-video", lambda t, c: [*SR], "refines a clip: give it as video:"),
    ("k6sr-image", lambda t, c: [*SR, _npy(t / "v.npy", (9, 24, 40, 3)), f"video={t / 'v.npy'}", _png(t / "a.png"),
                                 f"image={t / 'a.png'}"], "takes no image"),
    ("k6sr-frames", lambda t, c: [*SR, _npy(t / "v.npy", (9, 24, 40, 3)), f"video={t / 'v.npy'}",
                                  "sampling.num_frames=8"], "use 9"),
    ("k6sr-clip-too-short", lambda t, c: [*SR, _npy(t / "v.npy", (5, 24, 40, 3)), f"video={t / 'v.npy'}"],
     "has 5 frames, sampling.num_frames=9"),
    ("k6sr-guidance", lambda t, c: [*SR, _npy(t / "v.npy", (9, 24, 40, 3)), f"video={t / 'v.npy'}",
                                    "sampling.guidance_scale=3"], "has no guidance"),
    ("k6sr-scale", lambda t, c: [*SR, _npy(t / "v.npy", (9, 24, 40, 3)), f"video={t / 'v.npy'}",
                                 "options.resolution_scale=3"], "options.resolution_scale must be one of"),
    ("k6sr-size-multiple", lambda t, c: [*SR, _npy(t / "v.npy", (9, 24, 40, 3)), f"video={t / 'v.npy'}",
                                         "sampling.height=30"], "sampling.height must be a multiple of 4"),
    ("k6sr-clip-below-tile", lambda t, c: [*SR, _npy(t / "v.npy", (9, 8, 8, 3)), f"video={t / 'v.npy'}",
                                           "sampling.height=8", "sampling.width=8"], "smaller than the"),
    ("cogvideox-frames", lambda t, c: ["model.id=cogvideox-5b", "model.checkpoint=builtin:tiny-random",
                                       "sampling.num_frames=48"], "sampling.num_frames"),
    ("cogvideox-i2v-t2v-checkpoint", lambda t, c: ["model.id=cogvideox-5b-i2v", "model.checkpoint=builtin:tiny-random",
                                                   _png(t / "a.png"), f"image={t / 'a.png'}", "sampling.height=480",
                                                   "sampling.width=720"], "use a cogvideox-5b-i2v checkpoint"),
]


def _w(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return None


def _png(path):
    from PIL import Image

    Image.new("RGB", (64, 48), (200, 30, 30)).save(path)
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
def test_bad_input(case, tmp_path, ckpt, capsys, monkeypatch, no_sampling):
    name, setup, fragment = case
    if name == "output-unwritable" and os.geteuid() == 0:
        # root ignores directory permissions; a path under a regular file can never be created
        def setup(t, c):
            return [_w(t / "f", "x"), MODEL, f"model.checkpoint={c}", f"output.path={t / 'f' / 'o.mp4'}"] + SMALL
    monkeypatch.chdir(tmp_path)
    args = [a for a in setup(tmp_path, ckpt) if a is not None]
    if args and args[0].endswith((".yaml", ".yml")):
        argv = ["run", args[0], *args[1:]]
    else:
        argv = ["run", *args]
    if any(a.startswith("model.id") for a in argv):
        argv += [f"runtime.compilation_cache_dir={suite_cache_dir()}"]
    code = cli.main(argv + ["--quiet"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert fragment in err[0], err[0]
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
    print(f"{name}: {err[0]}")


# ---------------------------------------------------------------------------------------------------------------
# Every reproducer of the run fuzz campaign is one clean `error:` line (exit 2), before sampling.


def _junk_json(path, key, value):
    _set_json(path, **{key: value})


def _raw(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _st_header(path, mutate):
    """Rewrite the JSON header of a safetensors file with ``mutate(header)``, keeping the data bytes."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    mutate(header)
    blob = json.dumps(header).encode() if not isinstance(header, bytes) else header
    open(path, "wb").write(len(blob).to_bytes(8, "little") + blob + raw[8 + n :])


def _st_raw_header(path, blob: bytes):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    open(path, "wb").write(len(blob).to_bytes(8, "little") + blob + raw[8 + n :])


def _first_entry(header):
    return header[sorted(k for k in header if k != "__metadata__")[0]]


def _set_entry(field, value):
    def mutate(header):
        _first_entry(header)[field] = value
    return mutate


def _tok(c, **changes):
    path = c / "tokenizer/tokenizer.json"
    data = json.loads(path.read_text())
    for k, v in changes.items():
        if k == "charsmap":
            _set_charsmap(data, v)
        else:
            data[k] = v
    path.write_text(json.dumps(data))


def _set_charsmap(node, value):
    if isinstance(node, dict):
        if "precompiled_charsmap" in node:
            node["precompiled_charsmap"] = value
            return True
        return any(_set_charsmap(v, value) for v in node.values())
    if isinstance(node, list):
        return any(_set_charsmap(v, value) for v in node)
    return False


def _charsmap_normalizer(c):
    """Give the tokenizer a Precompiled normalizer whose charsmap is garbage (a Rust panic inside `tokenizers`)."""
    import base64

    path = c / "tokenizer/tokenizer.json"
    data = json.loads(path.read_text())
    data["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(b"\x05\0\0\0abc").decode()}
    path.write_text(json.dumps(data))


def _png(path):
    from PIL import Image

    Image.new("RGB", (16, 16), (200, 10, 10)).save(path)
    return None


def _symlink(link, target):
    link.unlink()
    os.symlink(target, link)


def _nan_noise(path):
    np.save(path, np.full((1, 4, 2, 8, 8), np.nan, np.float32))


TCFG = "transformer/config.json"
CK = lambda c: f"model.checkpoint={c}"  # noqa: E731
LONG_NAME = "v" * 300 + ".mp4"

# (case id, setup(tmp, ckpt) -> extra args, expected fragment of the error line)
ISSUE_12 = [
    # config and overrides
    ("list-for-mapping-override", lambda t, c: [MODEL, "sampling=[1]"], "sampling must be a mapping"),
    ("list-for-mapping-yaml", lambda t, c: [_w(t / "l.yaml", "model: {id: wan2.1-t2v-1.3b}\nsampling: [1]\n"),
                                            str(t / "l.yaml")],
     "sampling must be a mapping"),
    ("yaml-error-in-override", lambda t, c: [MODEL, "sampling.num_steps=[1,2"], "not valid YAML"),
    ("yaml-reader-error-in-override", lambda t, c: [MODEL, "sampling.num_steps=\x7f"], "sampling.num_steps"),
    ("huge-int", lambda t, c: [MODEL, "sampling.num_frames=1" + "0" * 400], "sampling.num_frames"),
    ("huge-float", lambda t, c: [MODEL, "sampling.guidance_scale=" + "9" * 400],
     "sampling.guidance_scale must be a finite number"),
    ("seed-2**63", lambda t, c: [MODEL, f"sampling.seed={2**63}"], "sampling.seed is out of range"),
    ("fps-2**63", lambda t, c: [MODEL, CK(c), "output.fps=9223372036854775808"] + SMALL, "output.fps"),
    ("fps-huge", lambda t, c: [MODEL, CK(c), "output.fps=100000"] + SMALL, "output.fps must be at most 1000"),
    ("guidance-inf", lambda t, c: [MODEL, "sampling.guidance_scale=.inf"], "must be a finite number"),
    ("flow-shift-nan", lambda t, c: [MODEL, "sampling.scheduler={name: unipc, flow_shift: .nan}"],
     "sampling.scheduler.flow_shift must be a finite number"),
    ("eta-nan", lambda t, c: [MODEL, "sampling.scheduler={name: unipc, eta: .nan}"],
     "sampling.scheduler.eta must be a finite number"),
    ("noise-all-nan", lambda t, c: [_nan_noise(t / "n.npy"), MODEL, CK(c),
                                    f"sampling.initial_noise={t / 'n.npy'}"] + SMALL,
     "NaN or infinite"),
    ("nul-in-path", lambda t, c: [MODEL, "output.path=a\0b.mp4"], "output.path contains a NUL byte"),
    ("nul-in-yaml-path", lambda t, c: [_w(t / "n.yaml",
                                          'model: {id: wan2.1-t2v-1.3b}\nsampling: {initial_noise: "a\\0b.npy"}\n'),
                                       str(t / "n.yaml")],
     "sampling.initial_noise contains a NUL byte"),
    ("newline-in-path", lambda t, c: [MODEL, "output.path=a\nb.mp4"], "output.path contains a control character"),
    ("name-too-long", lambda t, c: [MODEL, CK(c), f"output.path={t / LONG_NAME}"] + SMALL, "longer than 255 bytes"),
    ("cache-dir-is-file", lambda t, c: [_w(t / "cf", "x"), MODEL, CK(c),
                                        f"runtime.compilation_cache_dir={t / 'cf'}"] + SMALL,
     "is not a folder"),
    ("cache-dir-empty", lambda t, c: [MODEL, CK(c), "runtime.compilation_cache_dir="] + SMALL,
     "runtime.compilation_cache_dir must name a folder"),
    ("cache-dir-proc", lambda t, c: [MODEL, CK(c), "runtime.compilation_cache_dir=/proc/x"] + SMALL,
     "runtime.compilation_cache_dir /proc/x cannot be used"),
    ("same-output-twice", lambda t, c: [MODEL, CK(c), f"output.path={t / 'o.mp4'}",
                                        f"output.save_latents={t / 'o.mp4'}"] + SMALL,
     "name the same file"),
    ("scheduler-zero-timesteps", lambda t, c: [MODEL, CK(c),
                                               "sampling.scheduler={name: unipc, num_train_timesteps: 0}"] + SMALL,
     "num_train_timesteps must be at least 1"),
    ("checkpoint-does-not-fit-model", lambda t, c: [_png(t / "x.png"), "model.id=wan2.1-i2v-14b-480p",
                                                    f"image={t / 'x.png'}",
                                                    "model.checkpoint=builtin:tiny-random"] + SMALL,
     "is a text-to-video denoiser"),
    ("two-config-files", lambda t, c: [_w(t / "a.yaml", "model: {id: wan2.1-t2v-1.3b}\n"), _w(t / "b.yaml", "{}\n"),
                                       str(t / "a.yaml"), "k=v", str(t / "b.yaml")],
     "only one config file"),
    ("newline-in-override", lambda t, c: [MODEL, "sampling.num_steps=1\n2\n3"], "sampling.num_steps"),
    ("newline-in-key", lambda t, c: [MODEL, "sampling.\nsteps=3"], "no valid key"),
    ("newline-in-yaml-key", lambda t, c: [_w(t / "k.yaml", 'model: {id: wan2.1-t2v-1.3b}\nsampling: {"a\\nb": 1}\n'),
                                          str(t / "k.yaml")],
     "unknown config key sampling.'a\\nb'"),
    # checkpoint JSON files
    ("tokenizer-charsmap-panic", lambda t, c: [_charsmap_normalizer(c), MODEL, CK(c)] + SMALL, "tokenizer.json"),
    ("tokenizer-negative-max-length",
     lambda t, c: [_tok(c, truncation={"max_length": -5, "stride": 0, "strategy": "LongestFirst",
                                       "direction": "Right"}), MODEL, CK(c)] + SMALL,
     "truncation.max_length must be a non-negative integer"),
    ("tokenizer-added-tokens-int", lambda t, c: [_tok(c, added_tokens=[5]), MODEL, CK(c)] + SMALL,
     "added_tokens must be a list"),
    ("tokenizer-version-5", lambda t, c: [_tok(c, version=5), MODEL, CK(c)] + SMALL, "tokenizer.json cannot be loaded"),
    ("tokenizer-null", lambda t, c: [_w(c / "tokenizer/tokenizer.json", "null"), MODEL, CK(c)] + SMALL,
     "must hold a JSON object"),
    ("tokenizer-config-bad-no-tokenizer-json", lambda t, c: [_rm(c / "tokenizer/tokenizer.json"),
                                                             _w(c / "tokenizer/tokenizer_config.json", '{"a":' * 10),
                                                             MODEL, CK(c)] + SMALL,
     "tokenizer_config.json is not valid JSON"),
    ("tokenizer-config-brace", lambda t, c: [_w(c / "tokenizer/tokenizer_config.json", "{"), MODEL, CK(c)] + SMALL,
     "tokenizer_config.json is not valid JSON"),
    ("config-non-utf8", lambda t, c: [_raw(c / TCFG, b'{"a": "\xff"}'), MODEL, CK(c)] + SMALL, "not UTF-8"),
    ("model-index-non-utf8", lambda t, c: [_raw(c / "model_index.json", b'{"a": "\xfe"}'), MODEL, CK(c)] + SMALL,
     "not UTF-8"),
    ("config-deep-nesting", lambda t, c: [_w(c / TCFG, "[" * 100000), MODEL, CK(c)] + SMALL, "nested too deeply"),
    ("config-dev-zero", lambda t, c: [_symlink(c / TCFG, "/dev/zero"), MODEL, CK(c)] + SMALL, "not a regular file"),
    # safetensors headers
    ("st-deep-nesting", lambda t, c: [_st_raw_header(c / DIT, b"[" * 100000), MODEL, CK(c)] + SMALL,
     "corrupt safetensors header"),
    ("st-shape-1e300", lambda t, c: [_st_header(c / DIT, _set_entry("shape", [1e300])), MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-shape-2**70", lambda t, c: [_st_header(c / DIT, _set_entry("shape", [2**70])), MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-shape-inf", lambda t, c: [_st_raw_header(c / DIT, b'{"a": {"dtype": "F32", "shape": [Infinity], '
                                                           b'"data_offsets": [0, 4]}}'), MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-shape-negative", lambda t, c: [_st_header(c / DIT, _set_entry("shape", [-1, -1152])), MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-offsets-negative", lambda t, c: [_st_header(c / DIT, lambda h: _first_entry(h).update(data_offsets=[
        -8, _first_entry(h)["data_offsets"][1] - _first_entry(h)["data_offsets"][0] - 8])), MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-offsets-fractional", lambda t, c: [_st_header(c / DIT,
                                                       lambda h: _first_entry(h).update(data_offsets=[0.5, 4.5])),
                                            MODEL, CK(c)] + SMALL,
     "corrupt header entry"),
    ("st-offsets-overlap", lambda t, c: [_st_header(c / DIT, _overlap), MODEL, CK(c)] + SMALL,
     "overlap or leave a gap"),
    ("index-weight-map-string", lambda t, c: [_w(c / "transformer/diffusion_pytorch_model.safetensors.index.json",
                                                 '{"weight_map": "x"}'), MODEL, CK(c)] + SMALL,
     "weight_map must be a JSON object"),
    ("index-weight-map-int", lambda t, c: [_w(c / "transformer/diffusion_pytorch_model.safetensors.index.json",
                                              '{"weight_map": {"a": 5}}'), MODEL, CK(c)] + SMALL,
     "weight_map must be a JSON object"),
    # junk architecture numbers
    ("arch-heads-zero", lambda t, c: [_junk_json(c / TCFG, "num_attention_heads", 0), MODEL, CK(c)] + SMALL,
     "config.json: key num_attention_heads must be from 1"),
    ("arch-patch-size-2", lambda t, c: [_junk_json(c / TCFG, "patch_size", [1, 2]), MODEL, CK(c)] + SMALL,
     "key patch_size must have 3 entries"),
    ("arch-negative-dim", lambda t, c: [_junk_json(c / TCFG, "ffn_dim", -32), MODEL, CK(c)] + SMALL,
     "key ffn_dim must be from 1"),
    ("arch-float-dim", lambda t, c: [_junk_json(c / TCFG, "ffn_dim", 32.5), MODEL, CK(c)] + SMALL,
     "key ffn_dim must be an integer"),
    ("arch-string-dim", lambda t, c: [_junk_json(c / TCFG, "text_dim", "32"), MODEL, CK(c)] + SMALL,
     "key text_dim must be an integer"),
    ("arch-million-layers", lambda t, c: [_junk_json(c / TCFG, "num_layers", 1000000), MODEL, CK(c)] + SMALL,
     "key num_layers must be from 1 to 4096"),
    ("arch-z-dim-vs-latents-mean", lambda t, c: [_junk_json(c / "vae/config.json", "z_dim", 8), MODEL, CK(c)] + SMALL,
     "z_dim"),
]


def _overlap(header):
    names = sorted(k for k in header if k != "__metadata__")
    a, b = header[names[0]], header[names[1]]
    b["data_offsets"] = [a["data_offsets"][0], a["data_offsets"][0] + b["data_offsets"][1] - b["data_offsets"][0]]


@pytest.mark.parametrize("case", ISSUE_12, ids=[c[0] for c in ISSUE_12])
def test_run_reproducer_is_one_line(case, tmp_path, ckpt, capfd, monkeypatch, no_sampling):
    """Exit 2, exactly one line on stderr (fd 2 itself: a Rust panic writes there), no partial file, no folder."""
    name, setup, fragment = case
    monkeypatch.chdir(tmp_path)
    args = [a for a in setup(tmp_path, ckpt) if a is not None]
    if args and args[0].endswith((".yaml", ".yml")):
        argv = ["run", *args]
    else:
        argv = ["run", *args]
    if not any(a.startswith("runtime.compilation_cache_dir") for a in argv):
        argv += [f"runtime.compilation_cache_dir={suite_cache_dir()}"]
    if not any(a.startswith("output.path") for a in argv):
        argv += [f"output.path={tmp_path / 'new' / 'folder' / 'o.mp4'}"]
    code = cli.main(argv + ["--quiet"])
    out, err = capfd.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines[0]
    assert "internal error" not in lines[0]
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
    assert not (tmp_path / "new").exists(), "the pre-run check created an output folder for a run that failed"
    print(f"{name}: {lines[0]}")


@pytest.mark.parametrize("override,expected", [
    ("prompt=${oc.env:HOME}", ("prompt", "${oc.env:HOME}")),
    ("prompt=a ${b} c", ("prompt", "a ${b} c")),
    ("prompt=&", ("prompt", "&")),
    ("negative_prompt='", ("negative_prompt", "'")),
    ("prompt=a\x7fb", ("prompt", "a\x7fb")),
    ("prompt=[1, 2", ("prompt", "[1, 2")),
    ("prompt=123", ("prompt", "123")),
    ("output.path==", ("output.path", "=")),
    ("output.path=${x}.mp4", ("output.path", "${x}.mp4")),
])
def test_user_text_is_taken_literally(override, expected, tmp_path):
    """Prompts and paths are never YAML-parsed or interpolated."""
    from vidax_core import config
    from vidax_core.plugins import get_plugins

    cfg = config.resolve(None, [MODEL, override], get_plugins().preset_for)
    key, value = expected
    got = cfg
    for part in key.split("."):
        got = getattr(got, part)
    assert got == value


def test_yaml_prompt_is_not_interpolated(tmp_path):
    from vidax_core import config
    from vidax_core.plugins import get_plugins

    path = tmp_path / "c.yaml"
    path.write_text("model: {id: wan2.1-t2v-1.3b}\nprompt: '${oc.env:HOME} and ${b}'\n")
    cfg = config.resolve(str(path), [], get_plugins().preset_for)
    assert cfg.prompt == "${oc.env:HOME} and ${b}"


def test_tilde_in_output_path_is_the_home_folder(tmp_path, monkeypatch):
    from vidax_core import config
    from vidax_core.plugins import get_plugins

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    cfg = config.resolve(None, [MODEL, "output.path=~/x.mp4"], get_plugins().preset_for)
    assert cfg.output.path == str(tmp_path / "x.mp4")


def test_long_output_name_and_literal_prompt_run_to_a_decodable_video(tmp_path, ckpt, capsys, monkeypatch):
    """A 240-character output name works end to end (the temporary name stays short), and a prompt holding
    ``${...}`` runs as text."""
    from vidax_core.io.video import read_mp4

    monkeypatch.chdir(tmp_path)
    out = tmp_path / ("v" * 236 + ".mp4")
    code = cli.main(["run", MODEL, f"model.checkpoint={ckpt}", f"output.path={out}", "prompt=a ${b} c ${oc.env:HOME}",
                     f"runtime.compilation_cache_dir={suite_cache_dir()}", *SMALL, "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert out.stat().st_size > 0
    assert read_mp4(str(out)).shape == (5, 64, 64, 3)
