"""A toy model family for tests of planning code (dry run, bench): two stacked block groups, no reference.

``ToyGroupsPlugin(double, single)`` registers model ``toy-groups`` whose denoiser has a ``double_blocks`` group of
``double`` blocks and a ``single_blocks`` group of ``single`` blocks (both streamable), plus non-block parameters,
and a decoy parameter whose name ends in ``blocks`` but is no group. It declares no ``diffusers_reference``, no VAE
and no weights: only what ``vidax run --dry-run`` and the bench's planning read (its latent grid and sampler).
``toy_checkpoint(dir)`` writes
the one file its checkpoint folder needs.
"""

from __future__ import annotations

import json
import os

import numpy as np

from vidax_core.family import FamilyPlugin

WIDTH = 16
HEADS = 2
# leaf name -> shape per block (the group's leaves get the block count in front)
DOUBLE_LEAVES = {"attn": (WIDTH, 3 * WIDTH), "mlp": (WIDTH, 2 * WIDTH)}
SINGLE_LEAVES = {"mlp": (WIDTH, WIDTH)}
OTHER_LEAVES = {"embed": (4, WIDTH), "norm_blocks": (WIDTH,), "out": (WIDTH, 4)}  # norm_blocks: not a group

PRESET = {"prompt": "a toy", "negative_prompt": "", "model": {"checkpoint": None},
          "sampling": {"num_steps": 2, "guidance_scale": 2.0, "height": 16, "width": 16, "num_frames": 3,
                       "max_sequence_length": 8}, "output": {"fps": 8}}


def toy_checkpoint(folder: str | os.PathLike) -> str:
    """A checkpoint folder for ``toy-groups`` (a model_index.json is all the planning code reads)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model_index.json"), "w") as f:
        json.dump({"_class_name": "ToyPipeline"}, f)
    return str(folder)


def expected_bytes(double: int, single: int, dtype=np.float32) -> dict[str, int]:
    """Parameter bytes of the toy denoiser by part, from the shapes above (independent of the module code)."""
    item = np.dtype(dtype).itemsize
    size = lambda leaves, n: sum(n * int(np.prod(s)) for s in leaves.values()) * item  # noqa: E731
    return {"double_blocks": size(DOUBLE_LEAVES, double), "single_blocks": size(SINGLE_LEAVES, single),
            "other": size(OTHER_LEAVES, 1)}


def _toy_module(double: int, single: int):
    import jax.numpy as jnp
    from flax import nnx

    class Group(nnx.Module):
        def __init__(self, leaves: dict, n: int) -> None:
            for name, shape in leaves.items():
                setattr(self, name, nnx.Param(jnp.zeros((n, *shape), jnp.float32)))

    class ToyDiT(nnx.Module):
        block_groups = ("double_blocks", "single_blocks")  # the groups the model runs by name (offload checks it)

        def __init__(self) -> None:
            for name, shape in OTHER_LEAVES.items():
                setattr(self, name, nnx.Param(jnp.zeros(shape, jnp.float32)))
            self.double_blocks = Group(DOUBLE_LEAVES, double)
            self.single_blocks = Group(SINGLE_LEAVES, single)

    return ToyDiT


class ToyGroupsPlugin(FamilyPlugin):
    """Register with ``Plugins().add(ToyGroupsPlugin(2, 1), "toy")``."""

    family = "toy"
    models = ({"id": "toy-groups", "tasks": ("t2v",), "preset": PRESET},)

    def __init__(self, double: int = 2, single: int = 1) -> None:
        self.double, self.single = double, single

    def build_dit(self, spec, ckpt, run):
        from vidax_core.model_api import DitBuild

        ctor = _toy_module(self.double, self.single)
        return DitBuild(ctor=ctor, config=None, in_channels=4, heads=HEADS, patch_size=(1, 2, 2),
                        block_counts={"double_blocks": self.double, "single_blocks": self.single})

    def scheduler(self, spec, ckpt, run):
        from vidax_core.schedulers.base import get_sampler

        return get_sampler("flow_euler")

    def vae_latent_shape(self, spec, ckpt, run):
        s = run.sampling
        return (s.num_frames - 1) // 2 + 1, s.height // 4, s.width // 4
