"""A model id's published layout: its JSON files and every weight's name, shape and dtype, recorded from a
config-only diffusers folder, for the torch-free random checkpoint writer (``vidax bench --write-random-checkpoint``)
and ``vidax bench --random-dit --published``.

Each component of the folder is built on the meta device by the diffusers / transformers class its config (or the
pipeline's ``model_index.json``) names, and its state dict is recorded; the result is gzipped JSON at
``<plugin package>/assets/published/<model id>.json.gz``, where :func:`vidax_core.bench.random_checkpoint.layout_path`
finds it. Any plugin, in this repository or not, writes its ids' layouts so (needs the ``test`` extra: torch,
diffusers, transformers; ship the files as package data)::

    python -m vidax_core.bench.published_layout CONFIG_FOLDER MODEL_ID [--out DIR]

``CONFIG_FOLDER`` holds ``model_index.json`` and each component's ``config.json`` (tokenizer and scheduler files as
published); without ``--out`` the file goes to the assets of the plugin that registers ``MODEL_ID``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os

TENSORLESS = ("scheduler", "tokenizer", "image_processor", "feature_extractor", "text_tokenizer", "processor")

_MODULES = ("diffusers.pipelines.ltx2.connectors", "diffusers.pipelines.ltx2.vocoder",
            "diffusers.pipelines.ltx2.latent_upsampler", "diffusers.pipelines.ltx2.duration_head",
            "diffusers.pipelines.ltx.modeling_latent_upsampler")


def _named(name: str):
    """A diffusers / transformers class by name (top level, then the pipeline modules that hold model classes)."""
    import diffusers
    import transformers

    for lib in (diffusers, transformers):
        if hasattr(lib, name):
            return getattr(lib, name)
    for mod in _MODULES:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, name):
            return getattr(m, name)
    raise KeyError(f"no diffusers or transformers class {name}")


def _annotated(pipeline: str | None, component: str):
    """The class the pipeline's ``__init__`` annotates ``component`` with (None when it says none)."""
    import inspect
    import typing

    import diffusers

    cls = getattr(diffusers, pipeline or "", None)
    if cls is None:
        return None
    param = inspect.signature(cls.__init__).parameters.get(component)
    ann = None if param is None else param.annotation
    for candidate in [ann, *typing.get_args(ann)]:
        if isinstance(candidate, type) and candidate is not type(None):
            return candidate
        if isinstance(candidate, str):
            try:
                return _named(candidate.strip("'\""))
            except KeyError:
                continue
    return None


def _class(config: dict, declared: list | None, pipeline: str | None, component: str):
    """The class of a component: as model_index.json declares it, else its config's ``_class_name``, else the
    pipeline's annotation of it, else its config's ``architectures``."""
    name = (declared[1] if declared and len(declared) == 2 else None) or config.get("_class_name")
    cls = _named(name) if name else _annotated(pipeline, component)
    if cls is None:
        arch = (config.get("architectures") or [None])[0]
        if not arch:
            raise KeyError(f"{component}: no class in model_index.json, its config or the pipeline")
        cls = _named(arch)
    return cls, ("diffusers" if cls.__module__.startswith("diffusers") else "transformers")


def tensors_of(folder: str, declared: list | None = None, pipeline: str | None = None) -> dict[str, list]:
    """name -> [shape, dtype] of the component in ``folder``, built on the meta device."""
    import torch
    import transformers

    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    cls, lib = _class(config, declared, pipeline, os.path.basename(folder))
    with torch.device("meta"):
        if lib == "diffusers":
            model = cls.from_config(config)
        else:
            model = cls(transformers.AutoConfig.from_pretrained(folder))
    filled = {"_class_name": cls.__name__, **dict(model.config)} if lib == "diffusers" else \
        {**model.config.to_dict(), "architectures": [cls.__name__]}
    filled.pop("_name_or_path", None)  # the temporary folder it was built from: not part of the layout
    with open(os.path.join(folder, "config.json"), "w") as f:  # every default written out, as save_pretrained does
        json.dump(filled, f, indent=1, default=lambda v: list(v) if isinstance(v, tuple) else str(v))
    state = model.state_dict()
    tied = getattr(model, "_tied_weights_keys", None) or {}
    tied = set(tied) if isinstance(tied, (list, tuple, set, dict)) else set()
    # a tied alias (transformers' encoder.embed_tokens beside shared) is saved once, as save_pretrained does
    return {k: [list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in state.items() if k not in tied}


def layout(folder: str) -> dict:
    out = {"files": {}, "components": {}}
    index_path = os.path.join(folder, "model_index.json")
    index = json.load(open(index_path)) if os.path.exists(index_path) else {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and name.endswith(".json"):
            with open(path) as f:
                out["files"][name] = json.load(f)
        elif os.path.isdir(path):
            comp = {"files": {}, "tensors": None}
            if name not in TENSORLESS and os.path.exists(os.path.join(path, "config.json")):
                declared = index.get(name)
                try:
                    comp["tensors"] = tensors_of(path, declared if isinstance(declared, list) else None,
                                                 index.get("_class_name"))
                except (KeyError, ValueError) as exc:  # a placeholder config (LTX-2.5's unreleased encoder)
                    comp["unknown"] = " ".join(str(exc).split())[:200]
                    print(f"  {os.path.basename(folder)}/{name}: no layout ({comp['unknown'][:80]})")
            for fn in sorted(os.listdir(path)):
                fp = os.path.join(path, fn)
                if os.path.isfile(fp) and fn.endswith((".json", ".jinja")) and os.path.getsize(fp) < (1 << 20):
                    with open(fp) as f:
                        comp["files"][fn] = f.read()
            out["components"][name] = comp
    return out


def write_layout(folder: str, model_id: str, out: str | None = None) -> str:
    """Record ``folder``'s layout as ``<out>/<model_id>.json.gz`` (``out`` default: the ``assets/published`` folder
    of the plugin that registers ``model_id``); returns the file's path."""
    if out is None:
        from vidax_core.bench.random_checkpoint import plugin_assets

        out = os.path.join(plugin_assets(model_id), "published")
    os.makedirs(out, exist_ok=True)
    data = json.dumps(layout(folder), sort_keys=True, separators=(",", ":")).encode()
    path = os.path.join(out, f"{model_id}.json.gz")
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(data)
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m vidax_core.bench.published_layout",
                                description="record a config-only diffusers folder's layout for MODEL_ID")
    p.add_argument("folder", help="model_index.json + each component's config.json (and tokenizer files)")
    p.add_argument("model_id")
    p.add_argument("--out", default=None, help="write here instead of into the registering plugin's assets")
    a = p.parse_args(argv)
    path = write_layout(a.folder, a.model_id, a.out)
    print(f"{a.model_id}: {os.path.getsize(path) >> 10} KiB of layout -> {path}")


if __name__ == "__main__":
    main()
