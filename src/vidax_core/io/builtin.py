"""Built-in checkpoints generated on first use: seeded random weights in diffusers layout, in the user's cache.

A plugin's ``builtin_checkpoint`` hook may ship a tiny checkpoint as package data (Wan) or generate one from a
seed so the distribution stays small and nothing is downloaded. Generating needs the same few pieces in every
plugin, so they live here:

* :func:`cache_folder` — ``$XDG_CACHE_HOME/vidax/<distribution>/<version>/<name>`` (``~/.cache`` by default): the
  version is part of the path, so a release with another architecture regenerates its checkpoint;
* :func:`random_weights` — weights ~ N(0, 1/fan_in), every 1-D tensor (biases, norm gains) ~ N(0, 0.02^2): non-zero,
  so a bias mapped to the wrong place or dropped shows in any comparison;
* :func:`write_diffusers` — a diffusers-layout folder (``model_index.json``, one folder per component with its
  ``config.json`` and safetensors weights, ``scheduler/scheduler_config.json``) from ``{component: (config,
  shapes)}``;
* :func:`generated_checkpoint` — the folder of a named checkpoint, written on first use into a temporary folder
  and renamed into place, so an interrupted or concurrent first run never leaves half a checkpoint behind; under
  :func:`no_cache_writes` (``vidax run --dry-run``, which writes nothing) a checkpoint not yet in the cache is
  written to a temporary folder removed when the process ends.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from vidax_core.io.safetensors import save_file
from vidax_core.io.switch import ThreadSwitch

Shapes = Mapping[str, tuple[int, ...]]
INDEX = "model_index.json"


def cache_folder(distribution: str, version: str, name: str) -> str:
    """Where built-in checkpoint ``name`` of ``distribution`` ``version`` lives (``$XDG_CACHE_HOME`` honoured)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "vidax", distribution, version, name)


def random_weights(shapes: Shapes, rng: np.random.Generator | int = 0) -> dict[str, np.ndarray]:
    """float32 tensors for ``{key: shape}``: N(0, 1/fan_in) where fan_in is the product of all but the first
    dimension (torch's ``(out, in, *kernel)`` layout), N(0, 0.02^2) for 1-D tensors. Keys are drawn in sorted
    order, so the result depends only on the shapes and the seed."""
    rng = np.random.default_rng(rng) if isinstance(rng, (int, np.integer)) else rng
    out = {}
    for key in sorted(shapes):
        shape = tuple(int(n) for n in shapes[key])
        scale = 0.02 if len(shape) <= 1 else 1.0 / np.sqrt(np.prod(shape[1:]))
        out[key] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def write_json(path: str, data: Mapping[str, Any]) -> None:
    """``data`` as indented JSON (the format diffusers and transformers write)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def weight_file(component: str) -> str:
    """diffusers' weight file name: ``model.safetensors`` for transformers encoders (``text_encoder*``,
    ``image_encoder*``), ``diffusion_pytorch_model.safetensors`` for the rest."""
    if component.startswith(("text_encoder", "image_encoder")):
        return "model.safetensors"
    return "diffusion_pytorch_model.safetensors"


def write_diffusers(
    folder: str,
    components: Mapping[str, tuple[Mapping[str, Any], Shapes]],
    *,
    pipeline: str,
    library: str,
    scheduler: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> None:
    """Write a diffusers-layout checkpoint with random weights into ``folder`` (created; may exist empty).

    ``components``: ``{name: (config, {tensor key: shape})}``; each config needs ``_class_name``, which
    ``model_index.json`` records as ``[library, _class_name]``. ``scheduler``: a diffusers scheduler config
    (``_class_name`` e.g. ``FlowMatchEulerDiscreteScheduler``). Weights come from :func:`random_weights` with one
    generator seeded ``seed``, drawn component by component in the given order."""
    rng = np.random.default_rng(seed)
    index: dict[str, Any] = {"_class_name": pipeline}
    os.makedirs(folder, exist_ok=True)
    for name, (config, shapes) in components.items():
        if "_class_name" not in config:
            raise ValueError(f"component {name!r}: its config needs a _class_name (recorded in {INDEX})")
        os.makedirs(os.path.join(folder, name))
        write_json(os.path.join(folder, name, "config.json"), config)
        save_file(random_weights(shapes, rng), os.path.join(folder, name, weight_file(name)))
        index[name] = [library, config["_class_name"]]
    if scheduler is not None:
        os.makedirs(os.path.join(folder, "scheduler"))
        write_json(os.path.join(folder, "scheduler", "scheduler_config.json"), scheduler)
        index["scheduler"] = ["diffusers", scheduler["_class_name"]]
    write_json(os.path.join(folder, INDEX), index)


_READ_ONLY = ThreadSwitch()


def no_cache_writes():
    """Inside the block a checkpoint missing from the cache is generated into a temporary folder (removed at exit),
    not into the cache: a dry run leaves nothing behind."""
    return _READ_ONLY.turned_on()


def generated_checkpoint(distribution: str, version: str, name: str, write: Callable[[str], None]) -> str:
    """The folder of built-in checkpoint ``name`` (see :func:`cache_folder`), calling ``write(folder)`` to create
    it on first use. ``write`` fills a fresh folder inside a temporary directory next to the target, which is then
    renamed into place: a crash leaves no partial checkpoint, and when two processes race the first rename wins and
    the other uses its copy. A folder without ``model_index.json`` (written by an interrupted older version of
    this code) is replaced."""
    folder = cache_folder(distribution, version, name)
    if os.path.exists(os.path.join(folder, INDEX)):
        return folder
    if _READ_ONLY.on:
        scratch = tempfile.mkdtemp(prefix=f"vidax-{name}-")
        atexit.register(shutil.rmtree, scratch, True)
        write(os.path.join(scratch, name))
        return os.path.join(scratch, name)
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=parent)
    try:
        staged = os.path.join(tmp, name)
        write(staged)
        if not os.path.exists(os.path.join(staged, INDEX)):
            raise RuntimeError(f"built-in checkpoint {name!r}: the writer left no {INDEX} in {staged}")
        if os.path.isdir(folder) and not os.path.exists(os.path.join(folder, INDEX)):
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(staged, folder)
        except OSError:  # another process renamed its copy first: use that one
            if not os.path.exists(os.path.join(folder, INDEX)):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def packaged_checkpoint(package_file: str, name: str) -> str | None:
    """``assets/<name>`` next to a plugin module (``__file__``) when it holds a diffusers ``model_index.json``: what
    a ``builtin_checkpoint`` hook returns for the tiny checkpoints a plugin ships."""
    folder = os.path.join(os.path.dirname(package_file), "assets", name)
    return folder if os.path.exists(os.path.join(folder, "model_index.json")) else None
