"""Checks that run before any weights load, so a mistake costs seconds, not a 20-minute load."""

from __future__ import annotations

import os

from vidax_core.io import outputs
from vidax_core.config import RunConfig
from vidax_core.errors import UserError
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec

IMAGE_TASKS = ("i2v", "ti2v")


def preflight(cfg: RunConfig, spec: ModelSpec, plugins: Plugins, *, check_outputs: bool = True) -> None:
    """Raise a :class:`UserError` for the first problem found with ``cfg`` for model ``spec``."""
    problems = plugins.call("check_run", spec, run=cfg) or []
    if problems:
        raise UserError(problems[0])
    if cfg.image is not None:
        if not any(t in IMAGE_TASKS for t in spec.tasks):
            raise UserError(f"model {spec.id} is text-to-video only and takes no image: remove the `image` key")
        if not os.path.isfile(cfg.image):
            raise UserError(f"image {cfg.image} does not exist")
    if cfg.sampling.initial_noise and not os.path.isfile(cfg.sampling.initial_noise):
        raise UserError(f"sampling.initial_noise {cfg.sampling.initial_noise} does not exist")
    if check_outputs:
        out = cfg.output
        outputs.check_writable([out.path, out.save_latents, out.save_frames, out.metrics], out.overwrite)
