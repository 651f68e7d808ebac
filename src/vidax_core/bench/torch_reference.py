"""What every family's diffusers reference for ``vidax bench --reference diffusers`` shares: importing torch and
diffusers lazily (their absence is one line naming the extra), and timing a pipeline phase by phase the way
:func:`vidax_core.runner.loaded.run` times vidax, so the two rows divide.

* ``load_s``, ``encode_s``, ``decode_s``: :meth:`TorchClock.phase` around ``from_pretrained`` + move, the prompt
  encoding, and the pipeline's own decode (each ends with a device synchronise);
* steps: pass :meth:`TorchClock.on_step_end` as ``callback_on_step_end`` and call the pipeline inside
  :meth:`TorchClock.sampling`; step 0 starts when the call starts, ``per_step_s`` is the median of steps 1.. and
  ``compile_s`` is step 0 minus it (torch's first-call overhead, as the compiling step is for vidax);
* ``peak_rss_mb`` of the process; device peak bytes from ``torch.cuda.max_memory_allocated`` on CUDA, else n/a.

:class:`DiffusersReference` is the base of every family's reference class: the refusals, the load, the seed and
the metrics row are written once here, and a family states only its pipeline's calls and its own facts.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Any, Iterator

import numpy as np

from vidax_core.errors import UserError

MISSING = "--reference diffusers needs the test extra: pip install 'vidax-core[test]'"


def torch_diffusers() -> tuple[Any, Any]:
    """(torch, diffusers), or a one-line :class:`UserError` naming the extra to install."""
    try:
        import diffusers
        import torch
    except ImportError as exc:
        raise UserError(MISSING) from exc
    return torch, diffusers


def torch_dtype(torch: Any, name: str | None) -> Any:
    """The torch dtype of a ``model.dtype`` value (None: float32, as vidax runs on CPU)."""
    return getattr(torch, name or "float32")


class TorchClock:
    """Phase timings of one reference run on ``device`` ("cuda..." or "cpu")."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.device = torch, device
        self.cuda = device.startswith("cuda")
        self.times: dict[str, float] = {}
        self.stamps: list[float] = []
        self._call_start: float | None = None
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.start = time.perf_counter()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block (adds to ``<name>_s``), under ``torch.no_grad``, synchronised at the end."""
        t0 = time.perf_counter()
        with self.torch.no_grad():
            yield
        self.sync()
        self.times[f"{name}_s"] = self.times.get(f"{name}_s", 0.0) + time.perf_counter() - t0

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        """Around the denoising call that takes :meth:`on_step_end` as its ``callback_on_step_end``."""
        self._call_start = time.perf_counter()
        with self.phase("sampling"):
            yield

    def on_step_end(self, _pipe: Any, i: int, t: Any, kwargs: dict) -> dict:
        self.sync()
        self.stamps.append(time.perf_counter())
        return kwargs

    def metrics(self, **extra: Any) -> dict[str, Any]:
        """The metrics row: the phases, the step statistics, memory, and ``extra`` (shapes, dtype...)."""
        from vidax_core.report.metrics import peak_rss_mb

        edges = [self._call_start, *self.stamps] if self._call_start is not None else []
        steps = [b - a for a, b in zip(edges[:-1], edges[1:])]
        per_step = float(np.median(steps[1:])) if len(steps) > 1 else (steps[0] if steps else 0.0)
        return {
            "engine": "diffusers", "load_s": 0.0, "encode_s": 0.0, "decode_s": 0.0, **self.times,
            "compile_s": max(steps[0] - per_step, 0.0) if len(steps) > 1 else 0.0,
            "per_step_s": per_step, "step_times_s": steps, "num_steps": len(steps),
            "total_s": time.perf_counter() - self.start, "peak_rss_mb": peak_rss_mb(),
            "device_peak_bytes": int(self.torch.cuda.max_memory_allocated()) if self.cuda else None,
            "device_bytes_in_use": int(self.torch.cuda.memory_allocated()) if self.cuda else None,
            "backend": self.device, "torch": self.torch.__version__, "torch_threads": self.torch.get_num_threads(),
            **extra,
        }


class DiffusersReference:
    """One family's ``--reference diffusers`` run: built with ``(ckpt_dir, run)`` as the family's
    ``diffusers_reference`` declaration names it, it refuses what it cannot time before any work;
    called, it times the run and
    returns the metrics row. A subclass declares its family's facts (the attributes below) and writes
    ``__call__`` from :meth:`start`, :meth:`load`, :meth:`generator` and :meth:`metrics`, so every family loads,
    seeds and reports the same way.
    """

    engine = "diffusers"
    family = ""  # the name in the refusal messages
    text_only: str | None = "text-to-video"  # the only runs it times (None: image runs too)
    refused_inputs: tuple[str, ...] = ("image",)  # the run fields a text-only reference refuses
    remove = "`image`"  # what its message tells the user to remove
    scheduler: str | None = None  # the checkpoint's scheduler, when the reference refuses sampling.scheduler
    scheduler_options: tuple[str, ...] = ()  # options refused with sampling.scheduler
    run_dtype: tuple[str, ...] = ("transformer",)  # pipeline components loaded in model.dtype (others float32)

    def __init__(self, ckpt_dir: str, run: Any, device: str | None = None) -> None:
        torch_diffusers()
        self.ckpt_dir, self.run, self.device = ckpt_dir, run, device
        self.refuse(run)

    def refuse(self, run: Any) -> None:
        """Raise a :class:`UserError` for a run this reference cannot time; a subclass adds its own refusals
        after ``super().refuse(run)``."""
        if self.text_only and any(getattr(run, name) is not None for name in self.refused_inputs):
            raise UserError(f"--reference diffusers: the {self.family} reference times {self.text_only} runs only; "
                            f"remove {self.remove}")
        if self.scheduler and (run.sampling.scheduler is not None
                               or any(run.options.get(k) for k in self.scheduler_options)):
            names = " and ".join(["sampling.scheduler", *(f"options.{k}" for k in self.scheduler_options)])
            raise UserError(f"--reference diffusers: leave {names} unset (the checkpoint's {self.scheduler})")

    def start(self) -> tuple[Any, Any, str, Any, TorchClock]:
        """(torch, diffusers, device, dtype, clock) of a run starting now: CUDA when there is one (unless a device
        was given), ``model.dtype``; kept on the reference for :meth:`load`, :meth:`generator` and :meth:`metrics`."""
        torch, diffusers = torch_diffusers()
        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = torch_dtype(torch, self.run.model.dtype)
        self.clock = TorchClock(torch, self.device)
        return torch, diffusers, self.device, self.dtype, self.clock

    def configure(self, pipe: Any) -> None:
        """Change the loaded pipeline before it moves to the device (e.g. its scheduler); timed as ``load``."""

    def load(self, cls: Any, **kwargs: Any) -> Any:
        """``cls.from_pretrained`` of the checkpoint, timed as ``load``: the :attr:`run_dtype` components in
        ``model.dtype`` and the rest in float32, as the family runs them in vidax; then moved to the device, with
        the progress bar off."""
        import torch

        dtypes = {**{name: self.dtype for name in self.run_dtype}, "default": torch.float32}
        with self.clock.phase("load"):
            with warnings.catch_warnings():  # newer diffusers prefer dtype=; torch_dtype= works on every release
                warnings.simplefilter("ignore", FutureWarning)
                pipe = cls.from_pretrained(self.ckpt_dir, torch_dtype=dtypes, **kwargs)
            self.configure(pipe)
            pipe.to(self.device)
            pipe.set_progress_bar_config(disable=True)
        return pipe

    def generator(self) -> Any:
        """A CPU generator seeded with ``sampling.seed`` (CPU: the same draws whatever the device)."""
        import torch

        return torch.Generator(device="cpu").manual_seed(self.run.sampling.seed)

    def metrics(self, latents: Any, frames: Any, **extra: Any) -> dict[str, Any]:
        """The clock's metrics row with the final latents' and frames' shapes, the dtype and ``extra``."""
        return self.clock.metrics(latent_shape=list(latents.shape), frames_shape=list(np.shape(frames)),
                                  dtype=str(self.dtype).replace("torch.", ""), **extra)


def identity_ftfy(*modules: Any) -> None:
    """Give diffusers pipeline ``modules`` that call ``ftfy.fix_text`` unconditionally (SkyReels-V2, Helios) an
    identity ``ftfy`` when the package is not installed: vidax applies only the pipelines' HTML and whitespace
    cleaning, which equals ftfy's result on plain prompts."""
    import types

    for module in modules:
        if not hasattr(module, "ftfy"):
            module.ftfy = types.SimpleNamespace(fix_text=lambda text: text)


def wan_prompt_embeds(pipe: Any, run: Any, device: str, dtype: Any, clock: "TorchClock") -> dict[str, Any]:
    """The Wan pipelines' ``encode_prompt`` (Wan, SkyReels-V2, Helios, AnyFlow), timed as ``encode``: the call's
    ``prompt_embeds`` / ``negative_prompt_embeds`` in ``dtype`` (the negative only under guidance)."""
    s = run.sampling
    guided = s.guidance_scale > 1.0
    with clock.phase("encode"):
        pe, ne = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                                    do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length,
                                    device=device)
    return {"prompt_embeds": pe.to(dtype), "negative_prompt_embeds": None if ne is None else ne.to(dtype)}


def decode_wan_latents(pipe: Any, latents: Any) -> Any:
    """The Wan pipelines' decode (Wan, SkyReels-V2): latents de-normalised by the VAE's ``latents_mean`` /
    ``latents_std``, ``vae.decode``, ``postprocess_video`` to float frames."""
    import torch

    vae = pipe.vae
    z = latents.to(vae.device, dtype=vae.dtype)
    shape = (1, vae.config.z_dim, 1, 1, 1)
    mean = torch.tensor(vae.config.latents_mean).view(shape).to(z.device, z.dtype)
    inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(shape).to(z.device, z.dtype)
    video = vae.decode(z / inv_std + mean, return_dict=False)[0]
    return pipe.video_processor.postprocess_video(video, output_type="np")
