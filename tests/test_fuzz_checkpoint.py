"""Property-based fuzzing of checkpoint folders: JSON components, tokenizer files, safetensors headers and
shard indexes, missing and symlinked files.

Each input is the built-in tiny Wan checkpoint with one to three random mutations: a value anywhere in a JSON
file replaced by junk (zero, negative, huge, float, string, list, null, nested), a key deleted, the file replaced
by junk bytes, non-UTF-8, deep nesting or a symlink to /dev/zero; a safetensors header entry given junk shapes,
dtypes or offsets, or the file truncated or extended; a junk shard index; a component folder removed. The folder
is then opened as a run would, short of sampling: the checkpoint is resolved and checked against the model id,
the sampler built from its scheduler config, every tensor of every component read, the tokenizer loaded and
used, and every architecture config built. The contract: success or one :class:`UserError` line, quickly.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings
from vidax_core import config
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.io.run_checkpoint import checkpoint_for_run
from vidax_core.plugins import get_plugins

JSON_FILES = ["model_index.json", "transformer/config.json", "vae/config.json", "text_encoder/config.json",
              "scheduler/scheduler_config.json", "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"]
ST_FILES = ["transformer/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors",
            "text_encoder/model.safetensors"]
COMPONENTS = ["transformer", "vae", "text_encoder", "tokenizer", "scheduler"]

JUNK = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 7, 10**6, 2**31, 2**63, 10**400, 0.5, -2.5, 1e300, 1e-300, "", "x", "32",
                     None, True, False, [], [1, 2], [1, 2, 3, 4], {}, {"a": 1}, [0] * 3, [-1, 2, 2], [1e300],
                     "rms_norm", "Precompiled", "Right", "Left", "LongestFirst", "\ud800"]),
    st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
    st.lists(st.integers(-3, 300), max_size=4),
)


def _paths(node, prefix=()):
    """Every (path to a value) in a JSON document, shallow first, at most a few hundred."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in list(node.items())[:64]:
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:8]):
            out += _paths(v, prefix + (i,))
    return out[:400]


def _set(node, path, value, delete=False):
    for p in path[:-1]:
        node = node[p]
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


@st.composite
def json_mutation(draw, root):
    rel = draw(st.sampled_from(JSON_FILES))
    path = os.path.join(root, rel)
    if not _plain(path):
        return
    kind = draw(st.sampled_from(["value", "value", "value", "value", "delete", "bytes", "nonutf8", "nest", "devzero",
                                 "remove", "truncate", "notobject"]))
    if kind in ("value", "delete"):
        data = json.loads(open(path, encoding="utf-8").read())
        paths = [p for p in _paths(data) if p]
        if not paths:
            return
        where = draw(st.sampled_from(paths))
        value = draw(JUNK)
        _set(data, where, value, delete=kind == "delete")
        kind = f"{kind} {list(where)}={str(value)[:40]}"
        text = json.dumps(data, ensure_ascii=False)
        open(path, "wb").write(text.encode("utf-8", "surrogatepass"))
    elif kind == "bytes":
        open(path, "wb").write(draw(st.binary(max_size=40)))
    elif kind == "nonutf8":
        raw = bytearray(open(path, "rb").read())
        raw.insert(draw(st.integers(0, len(raw))), draw(st.sampled_from([0xFF, 0xFE, 0xC3, 0x80])))
        open(path, "wb").write(bytes(raw))
    elif kind == "nest":
        open(path, "w").write(draw(st.sampled_from(["[", "{\"a\":"])) * draw(st.sampled_from([10, 1000, 100000])))
    elif kind == "devzero":
        os.unlink(path)
        os.symlink(draw(st.sampled_from(["/dev/zero", "/dev/null", "/nonexistent", "/proc/self"])), path)
    elif kind == "remove":
        os.unlink(path)
    elif kind == "truncate":
        raw = open(path, "rb").read()
        open(path, "wb").write(raw[: draw(st.integers(0, max(len(raw) - 1, 0)))])
    else:
        open(path, "w").write(json.dumps(draw(st.sampled_from([None, 5, "x", [1], True]))))
    return f"{rel}: {kind}"


def _plain(path: str) -> bool:
    """A regular file an earlier mutation left alone enough to edit (not a symlink to /dev/zero...)."""
    return os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) < 50 << 20


def _read_header(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    return raw, n, json.loads(raw[8 : 8 + n])


@st.composite
def safetensors_mutation(draw, root):
    rel = draw(st.sampled_from(ST_FILES))
    path = os.path.join(root, rel)
    if not _plain(path):
        return
    raw, n, header = _read_header(path)
    names = sorted(k for k in header if k != "__metadata__")
    kind = draw(st.sampled_from(["entry", "entry", "entry", "swap", "headerbytes", "truncate", "append", "length",
                                 "index", "nest"]))
    if kind == "entry":
        entry = header[draw(st.sampled_from(names))]
        field = draw(st.sampled_from(["dtype", "shape", "data_offsets", "extra"]))
        value = draw(st.one_of(JUNK, st.sampled_from(["F16", "BF16", "I64", "U8", "F8_E4M3", "C64"]),
                               st.lists(st.integers(-(2**70), 2**70), max_size=3),
                               st.lists(st.integers(0, 5000), min_size=2, max_size=2)))
        entry[field] = value
        kind = f"entry {field}={str(value)[:40]}"
    elif kind == "swap":
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        header[a]["data_offsets"], header[b]["data_offsets"] = header[b]["data_offsets"], header[a]["data_offsets"]
    if kind in ("entry", "swap"):
        blob = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
        open(path, "wb").write(len(blob).to_bytes(8, "little") + blob + raw[8 + n :])
    elif kind == "headerbytes":
        buf = bytearray(raw)
        i = draw(st.integers(8, 8 + n - 1))
        buf[i] = draw(st.integers(0, 255))
        open(path, "wb").write(bytes(buf))
    elif kind == "truncate":
        open(path, "wb").write(raw[: draw(st.integers(0, len(raw) - 1))])
    elif kind == "append":
        open(path, "wb").write(raw + draw(st.binary(min_size=1, max_size=16)))
    elif kind == "length":
        value = draw(st.sampled_from([0, 1, n - 1, n + 1, 2**40, 2**64 - 1]))
        open(path, "wb").write(value.to_bytes(8, "little") + raw[8:])
    elif kind == "nest":
        blob = b"[" * 100000
        open(path, "wb").write(len(blob).to_bytes(8, "little") + blob + raw[8 + n :])
    else:
        folder = os.path.dirname(path)
        wm = draw(st.one_of(st.just({k: os.path.basename(path) for k in names}), JUNK,
                            st.dictionaries(st.text(max_size=3),
                                            st.one_of(JUNK, st.sampled_from(["../x.safetensors", "/etc/passwd",
                                                                             "a.safetensors"])),
                                            max_size=3)))
        open(os.path.join(folder, "diffusion_pytorch_model.safetensors.index.json"), "w").write(
            json.dumps({"metadata": {}, "weight_map": wm}))
    return f"{rel}: {kind}"


@st.composite
def folder_mutation(draw, root):
    comp = draw(st.sampled_from(COMPONENTS))
    kind = draw(st.sampled_from(["remove", "file", "symlink"]))
    path = os.path.join(root, comp)
    if os.path.islink(path) or not os.path.isdir(path):
        return
    shutil.rmtree(path)
    if kind == "file":
        open(path, "w").write("x")
    elif kind == "symlink":
        os.symlink(draw(st.sampled_from(["/dev", "/proc/self", "/nonexistent", root])), path)
    return f"{comp}/: {kind}"


OUTCOMES = Outcomes("checkpoint")
TINY = None


def _tiny() -> str:
    import vidax_wan

    return os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    OUTCOMES.report()
    OUTCOMES.assert_clean()


MODEL_IDS = ["wan2.1-t2v-1.3b", "wan2.1-t2v-1.3b", "wan2.1-i2v-14b-480p", "wan2.2-ti2v-5b"]


def open_like_a_run(folder: str, model_id: str) -> None:
    """Everything a run does with a checkpoint folder before the denoiser's first step, minus the compute."""
    from vidax_core.runner.plan import sampling_plan, select_sampler

    plugins = get_plugins()
    cfg = config.resolve(None, [f"model.id={model_id}", f"model.checkpoint={folder}", "sampling.height=64",
                                "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
                                "sampling.max_sequence_length=8", "image=unused.png"
                                if model_id == "wan2.1-i2v-14b-480p" else "prompt=x"], plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    sampler = select_sampler(spec, ckpt, cfg, plugins)
    sampling_plan(spec, ckpt, cfg, plugins, sampler, (2, 8, 8))  # as the run plans it (plugin arguments included)
    for comp in ("transformer", "vae", "text_encoder"):
        tensors = ckpt.tensors(comp)
        for k in tensors:
            np.asarray(tensors[k]).astype(np.float64).sum()
    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    tok(["a fuzzed prompt", ""], 8)
    plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=cfg)


@settings(**fuzz_settings(default=40))
@given(data=st.data(), n=st.integers(1, 3), model_id=st.sampled_from(MODEL_IDS))
def test_checkpoint_contract(tmp_path_factory, data, n, model_id):
    folder = str(tmp_path_factory.mktemp("ckpt") / "c")
    shutil.copytree(_tiny(), folder)
    done = []
    for _ in range(n):
        kind = data.draw(st.sampled_from(["json", "json", "safetensors", "safetensors", "folder"]))
        try:
            if kind == "json":
                done.append(data.draw(json_mutation(folder)))
            elif kind == "safetensors":
                done.append(data.draw(safetensors_mutation(folder)))
            else:
                done.append(data.draw(folder_mutation(folder)))
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
            break  # an earlier mutation removed or broke what this one edits: the folder is damaged enough
    check_contract(OUTCOMES, lambda: open_like_a_run(folder, model_id),
                   label=f"{model_id}; " + "; ".join(map(str, done)))


def test_pristine_checkpoint_opens():
    check_contract(OUTCOMES, lambda: open_like_a_run(_tiny(), "wan2.1-t2v-1.3b"))
