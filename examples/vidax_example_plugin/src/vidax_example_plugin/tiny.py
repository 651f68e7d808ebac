"""The built-in ``tiny`` checkpoint: deterministic random weights in diffusers layout, written on first use.

Nothing is downloaded: the folder is generated from a seed into the user's cache (``$XDG_CACHE_HOME`` or
``~/.cache``) under ``vidax/vidax-example-plugin/<version>/tiny``, atomically, so concurrent first runs are safe.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from vidax_core.io.safetensors import save_file

from . import __version__, dit, text, vae

TINY = {
    "transformer": {"_class_name": "ExampleDiT", "in_channels": 4, "patch_size": 2, "hidden_dim": 32, "num_heads": 2,
                    "num_layers": 2, "mlp_ratio": 2, "text_dim": 16, "freq_dim": 32},
    "text_encoder": {"_class_name": "ByteTextEncoder", "vocab_size": 257, "hidden_size": 16},
    "vae": {"_class_name": "UpsampleVAE", "latent_channels": 4, "out_channels": 3, "scale_factor": 2},
}
SCHEDULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0}
WEIGHT_FILES = {"transformer": "diffusion_pytorch_model.safetensors", "text_encoder": "model.safetensors",
                "vae": "diffusion_pytorch_model.safetensors"}


def cache_folder(name: str) -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "vidax", "vidax-example-plugin", __version__, name)


def random_weights(shapes: dict[str, tuple[int, ...]], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Weights ~ N(0, 1/fan_in), biases ~ N(0, 0.02^2) (non-zero, so a wrong bias mapping shows)."""
    out = {}
    for key in sorted(shapes):
        shape = shapes[key]
        scale = 0.02 if len(shape) == 1 else 1.0 / np.sqrt(np.prod(shape[1:]))
        out[key] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def write_json(path: str, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)


def write_tiny(folder: str, seed: int = 0) -> None:
    """Write the tiny checkpoint into ``folder`` (which must not exist yet)."""
    rng = np.random.default_rng(seed)
    shapes = {
        "transformer": dit.checkpoint_shapes(dit.ExampleDiTConfig.from_config(TINY["transformer"])),
        "text_encoder": text.checkpoint_shapes(TINY["text_encoder"]),
        "vae": vae.checkpoint_shapes(TINY["vae"]),
    }
    for component, config in TINY.items():
        os.makedirs(os.path.join(folder, component))
        write_json(os.path.join(folder, component, "config.json"), config)
        save_file(random_weights(shapes[component], rng), os.path.join(folder, component, WEIGHT_FILES[component]))
    os.makedirs(os.path.join(folder, "scheduler"))
    write_json(os.path.join(folder, "scheduler", "scheduler_config.json"), SCHEDULER)
    index = {"_class_name": "ExamplePipeline", "scheduler": ["diffusers", SCHEDULER["_class_name"]]}
    index |= {c: ["vidax_example_plugin", cfg["_class_name"]] for c, cfg in TINY.items()}
    write_json(os.path.join(folder, "model_index.json"), index)


def builtin_folder(name: str) -> str | None:
    """The folder of built-in checkpoint ``name``, generated on first use; None if there is no such checkpoint."""
    if name != "tiny":
        return None
    folder = cache_folder(name)
    if os.path.exists(os.path.join(folder, "model_index.json")):
        return folder
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=parent)
    try:
        write_tiny(os.path.join(tmp, name))
        if os.path.isdir(folder):  # a half-written folder from an older, interrupted version of this code
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(os.path.join(tmp, name), folder)
        except OSError:  # another process finished first: use its copy
            if not os.path.exists(os.path.join(folder, "model_index.json")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
