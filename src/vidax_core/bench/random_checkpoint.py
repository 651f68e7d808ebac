"""A diffusers-layout checkpoint of any registered model id with random weights, written with numpy alone.

  vidax bench --write-random-checkpoint MODEL_ID OUT [--blocks N] [--weight-dtype bfloat16|float8_e4m3fn|int8]
              [--full-text-encoder] [--fill random|zeros]

For timing and memory on machines that cannot download the real weights (and have no torch): the published
layout of the id (its JSON files and every tensor's name, shape and dtype, recorded once from diffusers /
transformers by :mod:`vidax_core.bench.published_layout` and shipped in the family's ``assets/published``) is
written back with random values, one safetensors file per component, streamed tensor by tensor so memory stays a
few tens of MiB whatever the model size. Key names, shapes and the storage dtypes are the real ones:

* the denoiser's (``transformer*``) stacked-block matrices in ``--weight-dtype``: bf16, plain fp8 (e4m3fn, as
  ComfyUI's fp8 files) or int8 with a per-output-channel ``weight_scale`` (LightX2V's layout); the rest of the
  denoiser, the text encoders and image encoders in bf16, VAEs (and vocoders, upsamplers) in float32;
* ``--blocks N`` keeps the first N blocks of each denoiser block group (the config's layer counts follow);
* the text encoders keep their full width but one layer and the tiny tokenizer's vocabulary (never below a
  special token id their config names), unless ``--full-text-encoder``; a component that reads every layer's
  hidden state follows the cut where its family declares it (:mod:`vidax_core.bench.text_layers`), else the text
  encoders keep every layer;
* tokenizers come from the family's built-in tiny checkpoint (no real vocabulary can be downloaded), which is
  enough to run: prompt encoding time is then not representative;
* ``--fill zeros`` writes the headers and leaves the data as holes in sparse files (no disk blocks, instant): for
  checking layouts and loaders, not for running.

Values are standard normal draws scaled by 1/sqrt(fan-in) (norm gains near 1, biases small), taken from one
seeded pool at a random offset per tensor, so writing runs at disk speed, not at the random generator's.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
import time
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from vidax_core.bench.text_layers import follow_text_cut, text_layers
from vidax_core.errors import UserError
from vidax_core.io.published import layout_path, read_layout  # noqa: F401 - the shipped layouts' readers
from vidax_core.io.safetensors import write_file

WEIGHT_DTYPES = ("bfloat16", "float8_e4m3fn", "int8")
FLOAT32_COMPONENTS = ("vae", "audio_vae", "vocoder", "latent_upsampler")
TEXT_COMPONENTS = re.compile(r"^text_encoder(_\d+)?$")
DIT_COMPONENTS = re.compile(r"^transformer(_\d+)?$")
_POOL_ELEMENTS = 1 << 20
_POOLS_KEPT = 8
_INDEX = re.compile(r"^(.*?)\.(\d+)\.")


# ---- cutting layers --------------------------------------------------------------------------------------------


def block_groups(keys: Iterable[str]) -> dict[str, int]:
    """Module-list prefix -> count, from the first ``.N.`` of each key (``blocks.12.attn.q.weight`` -> blocks)."""
    out: dict[str, int] = {}
    for k in keys:
        m = _INDEX.match(k)
        if m:
            out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(2)) + 1)
    return out


def _count_fields(config: Any, count: int, path: tuple = ()) -> list[tuple]:
    """Paths of the integer config entries named like a layer count whose value is ``count``."""
    found = []
    if isinstance(config, dict):
        for k, v in config.items():
            if isinstance(v, (dict, list)):
                found += _count_fields(v, count, path + (k,))
            elif type(v) is int and v == count and re.search(r"layer|block|depth", str(k)):
                found.append(path + (k,))
    return found


def _lists_of_length(config: Any, count: int, path: tuple = ()) -> list[tuple]:
    """Paths of per-layer lists (named like ``layer_types``) of length ``count``."""
    found = []
    if isinstance(config, dict):
        for k, v in config.items():
            if isinstance(v, list) and len(v) == count and re.search(r"layer", str(k)):
                found.append(path + (k,))
            elif isinstance(v, dict):
                found += _lists_of_length(v, count, path + (k,))
    return found


def _set(config: dict, path: tuple, fn: Callable[[Any], Any]) -> None:
    for k in path[:-1]:
        config = config[k]
    config[path[-1]] = fn(config[path[-1]])


def _trailing_kind(tensors: Mapping[str, list], prefix: str, count: int) -> int:
    """How many of the group's last blocks hold other modules than its first block (Motif-Video's DDT decoder
    blocks at the end of its single-stream stack): 0 when every block is alike."""
    kinds: dict[int, set[str]] = {}
    for k in tensors:
        m = _INDEX.match(k)
        if m and m.group(1) == prefix:
            kinds.setdefault(int(m.group(2)), set()).add(k[m.end():])
    tail = 0
    while tail < count - 1 and kinds.get(count - 1 - tail) != kinds.get(0):
        tail += 1
    if tail and len({frozenset(kinds.get(i, ())) for i in range(count - tail, count)}) > 1:
        return 0  # not one trailing kind
    return tail


def cut_layers(config: dict, tensors: Mapping[str, list], keep: int) -> tuple[dict, dict, dict[str, int]]:
    """``config`` and ``tensors`` with every block group longer than ``keep`` cut to its first ``keep`` layers,
    where the config names that group's length (a ``*layer*`` / ``*block*`` count of the same value; groups of one
    length may share one count, as Kandinsky 6's two text stacks do); returns the
    groups cut (prefix -> old count). A count of the group's last blocks that hold other modules than its first
    (``num_decoder_layers``) becomes the number of them the cut keeps (0 when it keeps only leading blocks)."""
    config = copy.deepcopy(config)
    cut: dict[str, int] = {}
    for prefix, count in block_groups(tensors).items():
        if count <= keep:
            continue
        fields = _count_fields(config, count)
        if not fields:
            if count in cut.values():  # a second group of the same length (one count field, already cut)
                cut[prefix] = count
            continue
        tail = _trailing_kind(tensors, prefix, count)
        for f in _count_fields(config, tail) if tail else ():  # those of the trailing kind that the cut keeps
            _set(config, f, lambda _v: max(0, keep - (count - tail)))
        for f in fields:
            _set(config, f, lambda _v: keep)
        for f in _lists_of_length(config, count):
            _set(config, f, lambda v: v[:keep])
        cut[prefix] = count
    kept = {}
    for k, v in tensors.items():
        m = _INDEX.match(k)
        if m and m.group(1) in cut and int(m.group(2)) >= keep:
            continue
        kept[k] = v
    return config, kept, cut


def _int_fields(config: Any, pattern: str, path: tuple = ()) -> list[tuple[tuple, int]]:
    """(path, value) of every integer config entry whose name matches ``pattern``."""
    found = []
    if isinstance(config, dict):
        for k, v in config.items():
            if isinstance(v, dict):
                found += _int_fields(v, pattern, path + (k,))
            elif type(v) is int and re.search(pattern, str(k)):
                found.append((path + (k,), v))
    return found


def cut_vocab(config: dict, tensors: Mapping[str, list], rows: int) -> tuple[dict, dict, dict[int, int]]:
    """``config`` and ``tensors`` with each vocabulary cut to ``rows`` entries (never below a special token id the
    config names): the rows of every tensor whose first axis is that vocabulary; returns old size -> new size."""
    config = copy.deepcopy(config)
    tensors = dict(tensors)
    special = max([v for _, v in _int_fields(config, r"token_(id|index)$|_token$")] + [0])
    cut: dict[int, int] = {}
    for path, size in _int_fields(config, r"^vocab_size$"):
        new = max(rows, special + 1)
        if new >= size:
            continue
        _set(config, path, lambda _v: new)
        cut[size] = new
    for k, (shape, dt) in list(tensors.items()):
        if shape and shape[0] in cut:
            tensors[k] = [[cut[shape[0]], *shape[1:]], dt]
    return config, tensors, cut


def _tiny_vocab(tiny: str | None, component: str) -> int | None:
    """The vocabulary of the tiny checkpoint's ``component`` (its tokenizer never emits a larger id)."""
    path = os.path.join(tiny, component, "config.json") if tiny else ""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        sizes = [v for _, v in _int_fields(json.load(f), r"^vocab_size$")]
    return max(sizes) if sizes else None


# ---- values ----------------------------------------------------------------------------------------------------


class _Pools:
    """Seeded standard normal draws, converted once per (dtype, mean, std) into a pool of the storage dtype and
    written from random offsets of it: a fresh draw (and dtype conversion) per element would bound the writer by
    the generator's speed, not the disk's."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.unit = self.rng.standard_normal(_POOL_ELEMENTS, dtype=np.float32)
        self._pools: OrderedDict[tuple, np.ndarray] = OrderedDict()  # the most recently used few

    def pool(self, dt: str, mean: float, std: float) -> np.ndarray:
        std = float(2.0 ** (round(4 * np.log2(std)) / 4)) if std > 0 else 0.0  # few pools: std to 2^(k/4)
        key = (dt, round(mean, 6), std)
        if key not in self._pools:
            if dt == "int8":
                self._pools[key] = np.clip(np.rint(self.unit * 32.0), -127, 127).astype(np.int8)
            else:
                self._pools[key] = (self.unit * np.float32(std) + np.float32(mean)).astype(_np_dtype(dt))
            while len(self._pools) > _POOLS_KEPT:
                self._pools.popitem(last=False)
        self._pools.move_to_end(key)
        return self._pools[key]

    def write(self, f: Any, n: int, dt: str, mean: float, std: float) -> None:
        """``n`` values of the pool written to ``f`` from a random offset, wrapping around."""
        pool = self.pool(dt, mean, std)
        pos = int(self.rng.integers(0, _POOL_ELEMENTS))
        while n > 0:
            take = min(n, _POOL_ELEMENTS - pos)
            f.write(memoryview(pool[pos:pos + take].view(np.uint8)))
            n -= take
            pos = 0


def _scale(key: str, shape: list) -> tuple[float, float]:
    """(mean, std) of a tensor's random values from its name and shape."""
    if len(shape) <= 1:
        if key.endswith("bias"):
            return 0.0, 0.02
        if re.search(r"norm|ln_|layernorm|scale|gamma|weight$", key):
            return 1.0, 0.05
        return 0.0, 0.02
    fan_in = int(np.prod(shape[1:])) or 1
    return 0.0, 1.0 / float(np.sqrt(fan_in))


# ---- writing ---------------------------------------------------------------------------------------------------


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name, None) or name)


class _Filler:
    """Writes each tensor's random values (an int8 weight's scale as computed, integer buffers as zeros)."""

    def __init__(self, pools: _Pools, entries: Mapping[str, tuple[list, str]], scales: Mapping[str, np.ndarray]):
        self.pools, self.entries, self.scales = pools, entries, scales

    def __call__(self, name: str, f: Any) -> None:
        shape, dt = self.entries[name]
        n = int(np.prod(shape, dtype=np.int64))
        dtype = _np_dtype(dt)
        if name in self.scales:
            f.write(np.asarray(self.scales[name], dtype).tobytes())
        elif dtype.kind in "iub" and dt != "int8":
            f.write(np.zeros(n, dtype).tobytes())
        else:
            self.pools.write(f, n, dt, *_scale(name, shape))


def _is_block_matrix(key: str, shape: list, groups: Mapping[str, int]) -> bool:
    m = _INDEX.match(key)
    return bool(m and m.group(1) in groups and len(shape) == 2 and key.endswith(".weight")
                and not re.search(r"norm|modulation|scale_shift", key))


def component_entries(name: str, tensors: Mapping[str, list], weight_dtype: str) -> tuple[dict, dict]:
    """(key -> (shape, storage dtype), int8 scale key -> values) of one component as the writer stores it."""
    floating = "float32" if name in FLOAT32_COMPONENTS else "bfloat16"
    groups = block_groups(tensors) if DIT_COMPONENTS.match(name) else {}
    entries, scales = {}, {}
    for key, (shape, dt) in tensors.items():
        if not dt.startswith(("float", "bfloat")):
            entries[key] = (shape, dt)
            continue
        if groups and weight_dtype != "bfloat16" and _is_block_matrix(key, shape, groups):
            entries[key] = (shape, weight_dtype)
            if weight_dtype == "int8":
                s = key[: -len(".weight")] + ".weight_scale"
                entries[s] = ([shape[0]], "float32")
                scales[s] = np.full(shape[0], _scale(key, shape)[1] / 32.0, np.float32)
            continue
        entries[key] = (shape, floating)
    return entries, scales


def _tokenizer_source(model_id: str, plugins: Any) -> str | None:
    """The family's built-in tiny checkpoint (its tokenizers are copied into the written folder)."""
    spec = plugins.registry.get(model_id)
    try:
        return plugins.call("builtin_checkpoint", spec, name="tiny-random")
    except Exception:  # noqa: BLE001 - a family without a built-in checkpoint
        return None


def write_random_checkpoint(model_id: str, out: str, *, blocks: int | None = None, weight_dtype: str = "bfloat16",
                            full_text_encoder: bool = False, fill: str = "random", seed: int = 0,
                            log: Callable[[str], None] = print, plugins: Any = None) -> dict:
    """Write ``model_id``'s random checkpoint folder at ``out``; returns a summary (bytes per component). The folder
    is written under a hidden temporary name beside ``out`` and renamed into place when complete: a failed or
    killed write leaves nothing under ``out`` (:mod:`vidax_core.io.stale` sweeps what killed writes left)."""
    from vidax_core.bench.arguments import check_folder
    from vidax_core.io import stale

    if out and os.path.exists(os.path.join(out, "model_index.json")):
        raise UserError(f"{out} already holds a checkpoint: remove it or choose another folder")
    check_folder("--write-random-checkpoint OUT", out, empty=True)
    out = os.path.abspath(os.path.expanduser(out))
    parent, base = os.path.dirname(out), os.path.basename(out)
    try:
        os.makedirs(parent, exist_ok=True)
        stale.sweep(parent, f".{base}.", ".partial")
        tmp = tempfile.mkdtemp(prefix=f".{base}{stale.stamp()}", suffix=".partial", dir=parent)
    except OSError as exc:
        raise UserError(f"--write-random-checkpoint OUT {out}: cannot write there ({exc.strerror or exc})") from None
    try:
        summary = _write(model_id, tmp, blocks=blocks, weight_dtype=weight_dtype,
                         full_text_encoder=full_text_encoder, fill=fill, seed=seed, log=log, plugins=plugins)
        os.rename(tmp, out)  # onto a missing or empty folder
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"--write-random-checkpoint OUT {out}: the write failed ({exc.strerror or exc}): check the "
                        "folder and its free space") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def _write(model_id: str, out: str, *, blocks: int | None, weight_dtype: str, full_text_encoder: bool, fill: str,
           seed: int, log: Callable[[str], None], plugins: Any) -> dict:
    from vidax_core.plugins import get_plugins

    if weight_dtype not in WEIGHT_DTYPES:
        raise UserError(f"--weight-dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {weight_dtype!r}")
    if fill not in ("random", "zeros"):
        raise UserError(f"--fill must be random or zeros, got {fill!r}")
    if blocks is not None and blocks < 1:
        raise UserError(f"--blocks must be at least 1, got {blocks}")
    plugins = plugins or get_plugins()
    lay = read_layout(model_id, plugins)
    if os.path.exists(os.path.join(out, "model_index.json")):
        raise UserError(f"{out} already holds a checkpoint: remove it or choose another folder")
    t0 = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    for fname, data in lay["files"].items():
        with open(os.path.join(out, fname), "w") as f:
            json.dump(data, f, indent=1)
    pools = _Pools(seed)
    summary: dict[str, Any] = {"model_id": model_id, "components": {}, "blocks": blocks, "weight_dtype": weight_dtype}
    tiny = _tokenizer_source(model_id, plugins)
    index = lay["files"].get("model_index.json", {})
    if tiny and os.path.isdir(tiny):  # every tokenizer of the tiny checkpoint, declared as it declares it
        with open(os.path.join(tiny, "model_index.json")) as f:
            tiny_index = json.load(f)
        for comp in sorted(os.listdir(tiny)):
            if "tokenizer" in comp and os.path.isdir(os.path.join(tiny, comp)):
                shutil.copytree(os.path.join(tiny, comp), os.path.join(out, comp), dirs_exist_ok=True)
                summary["components"][comp] = {"copied_from": "the family's built-in tiny checkpoint"}
                if comp in tiny_index and comp not in index:
                    index = {**index, comp: tiny_index[comp]}
        with open(os.path.join(out, "model_index.json"), "w") as f:
            json.dump(index, f, indent=1)
    plans: dict[str, tuple[dict, dict, dict]] = {}  # component -> (config, tensors, what was cut)
    shrink_text = not full_text_encoder
    for _attempt in range(2):
        plans, layers_before = {}, {}  # layers_before: each text encoder's published layer count
        for comp, c in lay["components"].items():
            if comp in summary["components"] or c["tensors"] is None:
                continue
            config, tensors, cut = json.loads(c["files"]["config.json"]), c["tensors"], {}
            if TEXT_COMPONENTS.match(comp) and text_layers(config) is not None:
                layers_before[comp] = text_layers(config)
            keep = blocks if DIT_COMPONENTS.match(comp) else (1 if shrink_text and TEXT_COMPONENTS.match(comp)
                                                              else None)
            if keep is not None:
                config, tensors, cut = cut_layers(config, tensors, keep)
            rows = _tiny_vocab(tiny, comp) if TEXT_COMPONENTS.match(comp) and shrink_text else None
            if rows:
                config, tensors, vocab_cut = cut_vocab(config, tensors, rows)
                cut.update({f"vocabulary {old}": new for old, new in vocab_cut.items()})
            plans[comp] = (config, tensors, cut)
        if shrink_text:
            follow_text_cut(plans, plugins.declared(plugins.registry.get(model_id), "text_layer_readers") or (),
                            layers_before)
        for comp, c in lay["components"].items():  # every JSON file first: the family's checks read them
            if comp in summary["components"]:
                continue
            os.makedirs(os.path.join(out, comp), exist_ok=True)
            for fname, text in c["files"].items():
                if comp in plans and fname == "config.json":
                    text = json.dumps(plans[comp][0], indent=1)
                with open(os.path.join(out, comp, fname), "w") as f:
                    f.write(text)
        problems = _config_problems(model_id, out, plugins) if shrink_text else []
        if not problems:
            break
        log(f"the text encoders keep every layer: the model reads them all ({problems[0]})")
        shrink_text = False
    for comp, (config, tensors, cut) in plans.items():
        entries, scales = component_entries(comp, tensors, weight_dtype)
        library = (index.get(comp) or ["diffusers"])[0]
        fname = "model.safetensors" if library == "transformers" else "diffusion_pytorch_model.safetensors"
        nbytes = write_file(os.path.join(out, comp, fname), {k: (sh, _np_dtype(dt)) for k, (sh, dt) in entries.items()},
                            None if fill == "zeros" else _Filler(pools, entries, scales))
        summary["components"][comp] = {"bytes": nbytes, "tensors": len(entries), "layers_cut": cut}
        shown = ", ".join(f"{p} {n}" if isinstance(n, int) and not p.startswith("vocabulary") else f"{p}->{n}"
                          for p, n in cut.items())
        log(f"{comp}: {len(entries)} tensors, {nbytes / 2**30:.2f} GiB" + (f" (cut: {shown})" if cut else ""))
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    with open(os.path.join(out, "random_checkpoint.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def _config_problems(model_id: str, folder: str, plugins: Any) -> list[str]:
    """The family's checkpoint checks over the written JSON files (a text encoder cut to one layer can break a
    model that reads every layer's hidden state, as Cosmos-Predict2.5 does)."""
    from vidax_core.api import resolve_config
    from vidax_core.io.checkpoint import Checkpoint

    spec = plugins.registry.get(model_id)
    try:
        cfg = resolve_config(model_id, [f"model.checkpoint={folder}", "sampling.num_frames=121"], plugins)
        found = plugins.call("check_checkpoint", spec, ckpt=Checkpoint(folder), run=cfg)
    except UserError as exc:
        return [str(exc)]
    return [p for p in (found or []) if "text_encoder" in p]


# ---- checking a written folder against the loaders --------------------------------------------------------------


def check_with_loaders(model_id: str, folder: str, plugins: Any = None) -> list[str]:
    """Run ``model_id``'s own loaders over ``folder`` with nothing read (:func:`vidax_core.io.lazy.check_only`):
    every denoiser, the VAE and the text encoder check every key and shape from the headers, as a real load would;
    returns the components checked (a loader's refusal raises)."""
    from vidax_core.api import resolve_config
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.io.lazy import check_only
    from vidax_core.plugins import get_plugins
    from vidax_core.runner import denoiser as P
    from vidax_core.report.progress import Reporter

    plugins = plugins or get_plugins()
    spec = plugins.registry.get(model_id)
    try:
        cfg = resolve_config(model_id, [f"model.checkpoint={folder}"], plugins)
    except UserError as exc:  # a model whose frame count is predicted (LTX-2.5's duration head): any valid one
        if "num_frames" not in str(exc):
            raise
        cfg = resolve_config(model_id, [f"model.checkpoint={folder}", "sampling.num_frames=121"], plugins)
    ckpt = Checkpoint(folder)
    done = []
    with check_only():
        for build in P.build_dit(spec, ckpt, cfg, plugins):
            P.load_dit(spec, ckpt, cfg, plugins, Reporter(quiet=True), build=build)
            done.append(build.component)
        if plugins.call("build_vae", spec, ckpt=ckpt, run=cfg) is not None:
            done.append("vae")
        if plugins.call("build_text_encoder", spec, ckpt=ckpt, run=cfg, mesh=None) is not None:
            done.append("text encoder")
    return done
