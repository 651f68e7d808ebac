"""Write each model id's published layout: its JSON files and every weight's name, shape and dtype, for the
torch-free random-checkpoint writer (``vidax bench --write-random-checkpoint``).

The configs are the families' config-only folders (``plugins/vidax_<family>/scripts/published_config_folders.py``
or ``tests/published.py``); each component is built on the meta device by the diffusers / transformers class its
config names, and its state dict is recorded. Output: ``plugins/vidax_<family>/src/vidax_<family>/assets/
published/<model id>.json.gz``. Needs the test extra (torch, diffusers, transformers); tests/test_random_checkpoint.py
checks that what is committed is what this writes.

    python scripts/published_layouts.py [FAMILY ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENSORLESS = ("scheduler", "tokenizer", "image_processor", "feature_extractor", "text_tokenizer", "processor")


def config_folders(family: str, out: str) -> dict[str, str]:
    """model id -> its config-only folder, made by the family's own script."""
    plugin = os.path.join(ROOT, "plugins", f"vidax_{family}")
    for script in sorted(os.listdir(os.path.join(plugin, "scripts"))):
        if script.startswith("published_") and script.endswith("config_folders.py"):
            subprocess.run([sys.executable, os.path.join(plugin, "scripts", script), out], check=True,
                           capture_output=True)
    if os.path.exists(os.path.join(plugin, "tests", "published.py")):
        sys.path.insert(0, os.path.join(plugin, "tests"))
        published = importlib.import_module("published")
        for model_id in published.DITS:
            published.write_config_folder(model_id, os.path.join(out, model_id))
        sys.path.pop(0)
    from vidax_core.plugins import get_plugins

    ids = sorted(s.id for s in get_plugins().registry if s.family == family)
    names = os.listdir(out) if os.path.isdir(out) else []
    found = {}
    for model_id in ids:
        if model_id in names:
            found[model_id] = os.path.join(out, model_id)
            continue
        within = sorted((n for n in names if n in model_id), key=len)  # hunyuan's t2v / i2v folders
        if within and not any(o in model_id for o in ("1.5",)):
            found[model_id] = os.path.join(out, within[-1])
    return found


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("families", nargs="*")
    p.add_argument("--out", default=None, help="write here instead of into the plugins' assets")
    a = p.parse_args()
    families = a.families or sorted(d[len("vidax_"):] for d in os.listdir(os.path.join(ROOT, "plugins"))
                                    if d.startswith("vidax_"))
    for family in families:
        with tempfile.TemporaryDirectory() as tmp:
            for model_id, folder in sorted(config_folders(family, tmp).items()):
                dest = a.out or os.path.join(ROOT, "plugins", f"vidax_{family}", "src", f"vidax_{family}", "assets",
                                             "published")
                os.makedirs(dest, exist_ok=True)
                data = json.dumps(layout(folder), sort_keys=True, separators=(",", ":")).encode()
                with gzip.GzipFile(os.path.join(dest, f"{model_id}.json.gz"), "wb", mtime=0) as f:
                    f.write(data)
                print(f"{family} {model_id}: {len(data) >> 10} KiB of layout")


if __name__ == "__main__":
    main()
