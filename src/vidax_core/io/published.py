"""A model id's published layout as a checkpoint without weights: what a dry run sizes when none is at hand.

Every family plugin ships, per model id, the published checkpoint's layout in ``assets/published/<id>.json.gz``
(recorded once from diffusers / transformers by ``scripts/published_layouts.py``): its JSON files and each
component's tensor names, shapes and dtypes. :class:`PublishedCheckpoint` answers the :class:`Checkpoint` API from
that record alone: configs are the published ones, tensors have shapes, dtypes and byte counts but no values
(reading one is an error), and the tokenizers are the family's built-in tiny checkpoint's (the dry run tokenizes
nothing). ``vidax run --dry-run`` uses it when the id's checkpoint is not on this machine, so every id is sized at
its real size (text encoders included) with no download and no network.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from typing import Any, Iterator, Mapping

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.arch import SOURCE_KEY
from vidax_core.io.checkpoint import Checkpoint

CONFIG_FILES = ("config.json", "scheduler_config.json", "preprocessor_config.json")


def layout_path(model_id: str, plugins: Any = None) -> str:
    """The shipped layout file of ``model_id`` (in its family plugin's ``assets/published``)."""
    from vidax_core.plugins import get_plugins

    plugins = plugins or get_plugins()
    spec = plugins.registry.get(model_id)
    obj = plugins.family_object(spec) if hasattr(plugins, "family_object") else None
    module = sys.modules.get(type(obj).__module__) if obj is not None else None
    here = os.path.dirname(getattr(module, "__file__", "") or "")
    path = os.path.join(here, "assets", "published", f"{model_id}.json.gz")
    if not os.path.exists(path):
        raise UserError(f"no published layout ships for {model_id} ({path}): its plugin has none yet "
                        "(python -m vidax_core.bench.published_layout CONFIG_FOLDER MODEL_ID "
                        "writes one from the id's configs)")
    return path


def read_layout(model_id: str, plugins: Any = None) -> dict:
    with gzip.open(layout_path(model_id, plugins), "rt") as f:
        return json.load(f)


def has_layout(model_id: str, plugins: Any = None) -> bool:
    try:
        layout_path(model_id, plugins)
    except UserError:
        return False
    return True


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name, None) or name)


class LayoutTensors(Mapping[str, Any]):
    """One component's tensors as the layout records them: names, shapes, dtypes and byte counts, no values."""

    def __init__(self, entries: Mapping[str, list], where: str) -> None:
        self._entries, self.where = entries, where

    def __getitem__(self, key: str) -> Any:
        if key not in self._entries:
            raise KeyError(key)
        raise UserError(f"{self.where} is a published layout without weights: tensor {key} has no values (a dry run "
                        "reads none; a run needs the checkpoint itself)")

    def __contains__(self, key: object) -> bool:  # a name is there without reading its (absent) value
        return key in self._entries

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self._entries[key][0])

    def dtype(self, key: str) -> np.dtype:
        return _np_dtype(self._entries[key][1])

    def nbytes(self, key: str) -> int:
        return int(np.prod(self.shape(key), dtype=np.int64)) * self.dtype(key).itemsize

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class PublishedCheckpoint(Checkpoint):
    """``model_id``'s published checkpoint from its shipped layout: configs and tensor headers, no weights."""

    published = True

    def __init__(self, model_id: str, plugins: Any = None, repo: str | None = None) -> None:
        from vidax_core.plugins import get_plugins

        plugins = plugins or get_plugins()
        self.layout = read_layout(model_id, plugins)
        self.model_id = model_id
        name = repo or model_id
        super().__init__(f"<published layout of {name}>", source=f"{name} (published layout, no weights)")
        self.model_index = dict(self.layout.get("files", {}).get("model_index.json", {}))
        self._tiny = _tiny_checkpoint(model_id, plugins)
        if self._tiny:  # the tiny checkpoint's tokenizers, declared as it declares them
            tiny_index = Checkpoint(self._tiny).model_index
            for comp, entry in tiny_index.items():
                if "tokenizer" in comp and comp not in self.model_index:
                    self.model_index[comp] = entry

    def _component(self, component: str) -> dict | None:
        return self.layout.get("components", {}).get(component)

    def _tiny_tokenizer(self, component: str) -> str | None:
        """The tiny checkpoint's folder standing in for a tokenizer component (no tensors), or None."""
        comp = self._component(component)
        folder = os.path.join(self._tiny, component) if self._tiny else ""
        if "tokenizer" in component and (comp is None or comp.get("tensors") is None) and os.path.isdir(folder):
            return folder
        return None

    def path(self, component: str) -> str:
        return self._tiny_tokenizer(component) or os.path.join(self.root, component)

    def has(self, component: str) -> bool:
        return self._component(component) is not None or self._tiny_tokenizer(component) is not None

    def require(self, component: str) -> str:
        if not self.has(component):
            raise UserError(f"the published layout of {self.model_id} has no {component}/ folder")
        return self.path(component)

    def config(self, component: str) -> dict[str, Any]:
        comp = self._component(component)
        if self._tiny_tokenizer(component):  # a tokenizer's config: the tiny checkpoint's files
            return Checkpoint(self._tiny).config(component)
        if comp is None:
            raise UserError(f"the published layout of {self.model_id} has no {component}/ folder")
        for name in CONFIG_FILES:
            if name in comp.get("files", {}):
                data = json.loads(comp["files"][name])
                data[SOURCE_KEY] = f"{self.model_id}'s published {component}/{name}"
                return data
        raise UserError(f"the published layout of {self.model_id} has no config for {component}/")

    def weight_files(self, component: str) -> list[str]:
        return []

    def read_tensors(self, component: str) -> Mapping[str, Any]:
        comp = self._component(component)
        if comp is None or comp.get("tensors") is None:
            raise UserError(f"the published layout of {self.model_id} has no {component} weights")
        return LayoutTensors(comp["tensors"], f"{self.model_id}'s published {component}/")


def _tiny_checkpoint(model_id: str, plugins: Any) -> str | None:
    """The family's built-in tiny checkpoint folder (its tokenizers stand in for the real ones), or None."""
    try:
        return plugins.call("builtin_checkpoint", plugins.registry.get(model_id), name="tiny-random")
    except Exception:  # noqa: BLE001 - a family without a built-in checkpoint
        return None
