"""Checks that run before any weights load, so a mistake costs seconds, not a 20-minute load."""

from __future__ import annotations

import os
import tempfile
from typing import Mapping

from vidax_core.io import noise, outputs
from vidax_core.io.media import check_image, check_video
from vidax_core.config import RunConfig, check_options, check_required_for, check_tiling
from vidax_core.errors import UserError
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec

IMAGE_TASKS = ("i2v", "ti2v")
VIDEO_TASKS = ("v2v",)


def needs_image(spec: ModelSpec) -> bool:
    """Whether ``spec`` makes video only from an image (image-to-video, no text-to-video task)."""
    return "t2v" not in spec.tasks and any(t in IMAGE_TASKS for t in spec.tasks)


def needs_video(spec: ModelSpec) -> bool:
    """Whether ``spec`` only refines or continues a given clip (video-to-video, no text- or image-to-video task)."""
    return not any(t in ("t2v",) + IMAGE_TASKS for t in spec.tasks) and any(t in VIDEO_TASKS for t in spec.tasks)


def placeholder_clip(folder: str, frames: int | None, width: int | None, height: int | None) -> str:
    """A black ``.npy`` clip of the video's frames and size in ``folder``, written sparse (no data, headers only
    matter to a plan): what a dry run of a video-to-video model given no clip plans with; returns its path."""
    import numpy as np

    path = os.path.join(folder, "placeholder_clip.npy")
    shape = (int(frames or 1), int(height or 64), int(width or 64), 3)
    np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape).flush()
    return path


def placeholder_image(folder: str, width: int | None, height: int | None) -> str:
    """A grey PNG of the video's size in ``folder``: what a dry run, or a server loading an image-to-video model
    whose requests bring their own image, plans with (only its size matters to the plan); returns its path."""
    from PIL import Image

    path = os.path.join(folder, "placeholder.png")
    Image.new("RGB", (int(width or 64), int(height or 64)), (128, 128, 128)).save(path)
    return path


def preflight(cfg: RunConfig, spec: ModelSpec, plugins: Plugins, *, check_outputs: bool = True,
              check_media: bool = True) -> None:
    """Raise a :class:`UserError` for the first problem found with ``cfg`` for model ``spec``; ``check_media``
    False: the image and video files are not opened (a frame stage's clip is written by the run before it)."""
    check_required_for(cfg, spec.predicts)
    check_options(cfg.options, spec.options, spec.id)
    check_tiling(cfg.vae.tiling, spec.tiling)
    problems = plugins.call("check_run", spec, run=cfg) or []
    if problems:
        raise UserError(problems[0])
    if cfg.image is not None:
        if not any(t in IMAGE_TASKS for t in spec.tasks):
            raise UserError(f"model {spec.id} takes no image (tasks: {', '.join(spec.tasks)}): remove the `image` key")
        if check_media and not os.path.isfile(cfg.image):
            raise UserError(f"image {cfg.image} does not exist")
        if check_media:
            check_image(cfg.image)
    if cfg.video is not None:
        if not any(t in VIDEO_TASKS for t in spec.tasks):
            raise UserError(f"model {spec.id} takes no conditioning video (tasks: {', '.join(spec.tasks)}): "
                            "remove the `video` key")
        if check_media and not os.path.isfile(cfg.video):
            raise UserError(f"video {cfg.video} does not exist")
        if check_media:
            check_video(cfg.video)
    if cfg.sampling.initial_noise and not os.path.isfile(cfg.sampling.initial_noise):
        raise UserError(f"sampling.initial_noise {cfg.sampling.initial_noise} does not exist")
    if cfg.sampling.initial_noise:
        noise.check_noise_file(cfg.sampling.initial_noise)
    check_sampler(cfg)
    if cfg.offload.enabled and cfg.offload.storage == "disk":  # the cache folder, looked at (nothing written)
        from vidax_core.parallel.disk_chunks import check_cache_root

        check_cache_root()
    if check_outputs:
        out = cfg.output
        outputs.check_writable([out.path, out.save_latents, out.save_frames, out.save_audio, out.metrics],
                               out.overwrite)
        check_cache_dir(cfg)


def check_sampler(cfg: RunConfig) -> None:
    """A sampler named in ``sampling.scheduler`` is built and planned for the run's steps now: options it cannot
    work with (a zero timestep count, a negative shift...) are a one-line error before anything loads."""
    choice = cfg.sampling.scheduler
    if choice is None:
        return
    from vidax_core.schedulers import base as sched_base

    opts, lists = sched_base.split_plan_lists(choice) if isinstance(choice, Mapping) else ({"name": choice}, {})
    name = opts.pop("name", None)
    if not isinstance(name, str) or not name:
        raise UserError("sampling.scheduler needs a name, e.g. {name: unipc, flow_shift: 3.0}")
    try:
        sampler = sched_base.get_sampler(name, **opts)
        arrays = sched_base.plan_with_lists(sampler, cfg.sampling.num_steps, lists).arrays()
    except (ValueError, TypeError, ArithmeticError, KeyError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise UserError(f"sampling.scheduler: {detail}") from None
    if not sched_base.plan_values_ok(arrays):
        raise UserError(f"sampling.scheduler: these options give {name} non-finite timesteps or sigmas")


def check_cache_dir(cfg: RunConfig) -> None:
    """The persistent compilation cache folder must be (or become) a writable folder; it is a cache, so it is
    created here."""
    if not cfg.runtime.compilation_cache:
        return
    path = os.path.expanduser(cfg.runtime.compilation_cache_dir)
    key = "runtime.compilation_cache_dir"
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(f"{key} {path} exists and is not a folder: "
                        "choose a folder or set runtime.compilation_cache=false")
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".vidax-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"{key} {path} cannot be used as a folder ({exc.strerror or exc}): choose another folder or "
                        "set runtime.compilation_cache=false") from None
