"""The Python API: load a model once, generate many videos.

    import vidax
    with vidax.load("configs/wan21_1_3b_480p.yaml", "model.checkpoint=/data/Wan2.1-T2V-1.3B-Diffusers") as pipe:
        out = pipe(prompt="A corgi surfing", seed=3, num_steps=30)
        out.save("out/corgi.mp4")

A model that makes its video chunk by chunk hands the frames out as they are made (``for frames in
pipe.stream(prompt=...)``); a causal one keeps its KV cache on request (``keep_cache=True``) and continues the video
over it (``pipe.extend(out.session, seconds=2)``).

``load`` takes what ``vidax run`` takes (a config file or a model id, then ``key=value`` overrides) and makes
every check the CLI makes before loading, with the same one-line :class:`UserError` messages. A call may change
the prompts, media, options and ``sampling.*`` keys; the model, parallel layout, offload and attention settings
belong to the load (the call arguments: :mod:`vidax_core.config.call`). ``vidax serve`` serves a :class:`Pipe`;
``vidax run`` and ``--prompts`` batches drive the same loaded model (:mod:`vidax_core.runner.loaded`) directly.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vidax_core.config.call import CALL_ARGUMENTS, LOAD_ONLY, NO_OUTPUT, SAMPLING_KEYS, call_changes
from vidax_core.errors import Cancelled, UserError

__all__ = ["load", "Pipe", "Output", "Stream", "UserError", "Cancelled", "SAMPLING_KEYS", "CALL_ARGUMENTS",
           "LOAD_ONLY"]


@dataclass
class Output:
    """One generated video: ``frames`` float32 (batch, frames, height, width, 3) in [0, 1], the final
    ``latents`` (what ``output.save_latents`` writes), ``audio`` / ``sample_rate`` for models with sound, and the
    ``metrics`` record of ``vidax run``."""

    frames: np.ndarray
    latents: Any
    metrics: dict = field(default_factory=dict)
    audio: np.ndarray | None = None
    sample_rate: int | None = None
    fps: int = 16
    session: Any = None  # a causal model's kept state (keep_cache=True): what Pipe.extend continues

    def save(self, path: str, fps: int | None = None) -> str:
        """Write the mp4 (with the audio track when there is one); returns the path."""
        from vidax_core.runner.outputs import write_video

        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        write_video(path, self.frames[0], int(fps or self.fps), self.audio, self.sample_rate)
        return path


def resolve_config(config: Any, overrides: Sequence[str] = (), plugins: Any = None):
    """A run config from a YAML path, a model id, a dict or a RunConfig, plus ``key=value`` overrides."""
    from vidax_core import config as config_mod
    from vidax_core.config.parse import short_repr
    from vidax_core.plugins import get_plugins

    plugins = plugins or get_plugins()
    for item in overrides:
        if not isinstance(item, str):
            raise UserError(f"vidax.load takes overrides as 'key=value' strings after the config, got "
                            f"{type(item).__name__} {short_repr(item)}")
    if isinstance(config, config_mod.RunConfig):
        if not overrides:
            return config
        config = config_mod.to_dict(config)
    if isinstance(config, Mapping):
        return config_mod.resolve_layers(dict(config), list(overrides), plugins.preset_for)
    if not isinstance(config, str) or not config:
        raise UserError("vidax.load takes a config file path, a model id, a dict or a RunConfig")
    if config.endswith((".yaml", ".yml")) or os.path.isfile(config):
        return config_mod.resolve(config, list(overrides), plugins.preset_for)
    return config_mod.resolve(None, [f"model.id={config}", *overrides], plugins.preset_for)


class Pipe:
    """A loaded model: call it to generate (one call at a time), :meth:`close` it to free device memory."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.spec = model.spec
        self.config = model.base

    @property
    def fps(self) -> int:
        return int(self.config.output.fps)

    @property
    def closed(self) -> bool:
        return self._model.closed

    def resolve(self, **kwargs: Any):
        """The call config of these arguments, checked as a run checks it (no sampling): raises UserError."""
        return self.prepare(**kwargs).cfg

    def prepare(self, **kwargs: Any):
        """These call arguments checked and planned as a call plans them (no weight is read, nothing samples):
        :meth:`run` runs the plan as it is. ``.cfg`` is the call's config. Raises UserError."""
        return self._model.plan_call(self._call_config(kwargs))

    def run(self, prepared: Any, *, on_progress: Callable[[int, int], None] | None = None,
            cancel: Any = None, on_chunk: Callable[[np.ndarray, int, int], None] | None = None,
            on_decode: Callable[[int, int], None] | None = None, keep_cache: bool = False,
            extend: Any = None) -> Output:
        """One video from a call :meth:`prepare` planned (``vidax serve`` plans a request when it is posted and
        runs that plan); the callbacks as :meth:`__call__` takes them. ``keep_cache`` / ``extend``: as
        :meth:`__call__` and :meth:`extend` take them."""
        check_callbacks(on_progress, cancel)
        if on_decode is not None and not callable(on_decode):
            raise UserError(f"on_decode must be a function of (done, total), got {type(on_decode).__name__}")
        if extend is not None and not hasattr(extend, "continued"):
            raise UserError(f"extend takes the session of an output made with keep_cache=True, got "
                            f"{type(extend).__name__}")
        cfg = None
        if isinstance(prepared, _Continuation):  # planned inside the call: its windows are the session's
            cfg, prepared = prepared.cfg, None
        result = self._model.generate(cfg, plan=prepared, on_progress=on_progress, cancel=cancel, on_chunk=on_chunk,
                                      on_decode=on_decode, keep_cache=bool(keep_cache), extend=extend)
        return Output(result.frames, result.latents, result.metrics, result.audio, result.sample_rate,
                      int((prepared.cfg if prepared is not None else cfg).output.fps), result.session)

    def accepts(self, **kwargs: Any) -> bool:
        """Whether a call with these arguments meets the model's own rules (the config's, the family's
        ``check_run``, the denoiser's patch and position limits at the latent grid), without planning it: what
        ``vidax serve``'s page offers."""
        from vidax_core.runner.grid_check import fits

        model = self._model
        try:
            cfg = self._call_config(kwargs)
            if model.plugins.call("check_run", self.spec, run=cfg):
                return False
            grid = model.planner.grid(cfg)
        except UserError:
            return False
        return grid is None or fits(model.builds, grid)

    def frames_for_seconds(self, seconds: float) -> int:
        """The smallest frame count this model accepts that lasts at least ``seconds`` at the preset's fps."""
        seconds = _seconds(seconds)
        start = max(int(np.ceil(seconds * self.fps - 1e-9)), 1)
        last: UserError | None = None
        for n in range(start, start + 129):
            try:
                return self._check_frames(n)
            except UserError as exc:
                last = exc
        raise UserError(f"no frame count from {start} to {start + 128} suits {self.spec.id}: {last}")

    def _check_frames(self, n: int) -> int:
        cfg = self._call_config({"num_frames": n})
        problems = self._model.plugins.call("check_run", self.spec, run=cfg) or []
        if problems:
            raise UserError(problems[0])
        return n

    def __call__(self, *, on_progress: Callable[[int, int], None] | None = None, cancel: Any = None,
                 on_chunk: Callable[[np.ndarray, int, int], None] | None = None,
                 on_decode: Callable[[int, int], None] | None = None, keep_cache: bool = False,
                 **kwargs: Any) -> Output:
        """One video. ``on_progress(done, total)`` after every denoising step (of every window of a chunked
        model); ``on_decode(done, total)`` after every VAE chunk of the final decode (a chunked model decodes
        window by window as it samples: no such calls); ``on_chunk(frames, k, n)`` with the new frames
        (B, T, H, W, 3) as each of the ``n`` windows of a chunked model completes (once, with every frame, for other
        models); ``cancel`` (an Event or a callable) stops the run between steps and keeps nothing partial.
        ``keep_cache``: a causal model keeps this call's state (KV cache, decode stream) as ``Output.session``, for
        :meth:`extend` (the pipe keeps one: keeping another releases it)."""
        check_callbacks(on_progress, cancel)
        if on_chunk is not None and not callable(on_chunk):
            raise UserError(f"on_chunk must be a function of (frames, k, n), got {type(on_chunk).__name__}")
        return self.run(self.prepare(**kwargs), on_progress=on_progress, cancel=cancel, on_chunk=on_chunk,
                        on_decode=on_decode, keep_cache=keep_cache)

    @property
    def streams(self) -> bool:
        """Whether this model makes its video chunk by chunk (each chunk's frames out as it is made)."""
        return self._model.first_plan.windows is not None

    @property
    def continues(self) -> bool:
        """Whether this model keeps a KV cache a later call can continue (:meth:`extend`)."""
        return self._model.first_plan.kv_cache is not None

    def prepare_continuation(self, *, seconds: float | None = None, num_frames: int | None = None,
                             **kwargs: Any) -> Any:
        """A continuation's call (``seconds`` or ``num_frames`` more, the other arguments as :meth:`__call__`),
        checked, for :meth:`run` with ``extend=session`` (``vidax serve`` prepares one when it is posted)."""
        kwargs["num_frames"] = self._added_frames(seconds, num_frames) + 1  # planned as a video of that many
        return _Continuation(self._call_config(kwargs))

    def extend(self, session: Any, *, seconds: float | None = None, num_frames: int | None = None,
               keep_cache: bool = False, on_progress: Callable[[int, int], None] | None = None, cancel: Any = None,
               on_chunk: Callable[[np.ndarray, int, int], None] | None = None, **kwargs: Any) -> Output:
        """Continue the video of ``session`` (``Output.session`` of a call with ``keep_cache=True``) over its kept
        KV cache: ``seconds`` more (at the pipe's fps, a whole number of the VAE's 4-frame groups) or ``num_frames``
        more frames; the other arguments as :meth:`__call__` (a new prompt steers what follows). The output holds
        the new frames only."""
        plan = self.prepare_continuation(seconds=seconds, num_frames=num_frames, **kwargs)
        return self.run(plan, on_progress=on_progress, cancel=cancel, on_chunk=on_chunk, keep_cache=keep_cache,
                        extend=session)

    def stream(self, *, on_progress: Callable[[int, int], None] | None = None, keep_cache: bool = False,
               extend: Any = None, seconds: float | None = None, **kwargs: Any) -> "Stream":
        """``for frames in pipe.stream(prompt=...)``: the video's frames (B, T, H, W, 3) as they are made, chunk by
        chunk for a chunked (causal) model, all at once for another; the same arguments as :meth:`__call__` (with
        ``extend=session`` and ``seconds``: :meth:`extend`'s). Leaving the loop early cancels the run; the
        iterator's ``output`` is the finished call's :class:`Output`."""
        if extend is not None:
            plan = self.prepare_continuation(seconds=seconds, num_frames=kwargs.pop("num_frames", None), **kwargs)
        else:
            if seconds is not None:
                kwargs["num_frames"] = self.frames_for_seconds(seconds)
            plan = self.prepare(**kwargs)
        return Stream(self, plan, on_progress=on_progress, keep_cache=keep_cache, extend=extend)

    def _added_frames(self, seconds: float | None, num_frames: int | None) -> int:
        if (seconds is None) == (num_frames is None):
            raise UserError("a continuation takes seconds=... or num_frames=... (the frames to add), one of them")
        if seconds is not None:
            return max(4, int(np.ceil(_seconds(seconds) * self.fps / 4 - 1e-9)) * 4)
        if not isinstance(num_frames, int) or num_frames < 4 or num_frames % 4:
            raise UserError(f"num_frames of a continuation must be a multiple of 4 (the VAE's frame groups), got "
                            f"{num_frames!r}")
        return num_frames

    def _call_config(self, kwargs: Mapping[str, Any]):
        if self._model.closed:
            raise UserError("this pipe is closed: load the model again (vidax.load) to generate")
        return self._model.call_config(**call_changes(self.config, kwargs))

    def close(self) -> None:
        """Free the device memory the model holds; later calls raise UserError."""
        self._model.close()

    def __enter__(self) -> "Pipe":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "loaded"
        return f"<vidax.Pipe {self.spec.id} ({state})>"


def _seconds(value: Any) -> float:
    """A duration in seconds, checked (a number between 0 and 3600)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UserError(f"seconds must be a number, got {value!r}") from None
    if not 0 < seconds < 3600:
        raise UserError(f"seconds must be between 0 and 3600, got {seconds}")
    return seconds


@dataclass(frozen=True)
class _Continuation:
    """A continuation's call config: the call plans it itself (its windows are its session's)."""

    cfg: Any


class Stream:
    """The frames of one call as they are made (:meth:`Pipe.stream`): iterate for (B, T, H, W, 3) arrays; the call
    runs on a thread of its own, each chunk handed over as its frames are decoded. ``output``: the finished call's
    :class:`Output` (after the loop); :meth:`close` (or leaving the loop early) cancels it; errors surface in the
    loop."""

    def __init__(self, pipe: Pipe, plan: Any, *, on_progress=None, keep_cache: bool = False, extend: Any = None):
        import queue
        import threading

        self.output: Output | None = None
        self.chunks = 0
        self._queue: Any = queue.Queue()
        self._stop = threading.Event()
        self._done = object()

        def work() -> None:
            try:
                self.output = pipe.run(plan, on_progress=on_progress, cancel=self._stop, keep_cache=keep_cache,
                                       extend=extend, on_chunk=lambda frames, k, n: self._queue.put(np.array(frames)))
                self._queue.put(self._done)
            except BaseException as exc:  # noqa: BLE001 - handed to the iterating thread
                self._queue.put(exc)

        self._thread = threading.Thread(target=work, name="vidax-stream", daemon=True)
        self._thread.start()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> np.ndarray:
        item = self._queue.get()
        if item is self._done:
            self._thread.join()
            raise StopIteration
        if isinstance(item, BaseException):
            self._thread.join()
            if isinstance(item, Cancelled) and self._stop.is_set():
                raise StopIteration
            raise item
        self.chunks += 1
        return item

    def close(self) -> None:
        """Stop the call (between its steps) and wait for it."""
        if self._thread.is_alive():
            self._stop.set()
            while self._thread.is_alive():
                try:
                    self._queue.get(timeout=0.1)
                except Exception:  # noqa: BLE001 - queue.Empty
                    pass
            self._thread.join()

    def __del__(self) -> None:
        if getattr(self, "_thread", None) is not None and self._thread.is_alive():
            self._stop.set()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_callbacks(on_progress: Any, cancel: Any) -> None:
    """A call's ``on_progress`` must be callable and its ``cancel`` an Event or a callable, before anything runs."""
    if on_progress is not None and not callable(on_progress):
        raise UserError(f"on_progress must be a function of (done, total), got {type(on_progress).__name__}")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)) and not callable(cancel):
        raise UserError(f"cancel must be a threading.Event or a function returning true to stop, got "
                        f"{type(cancel).__name__}")


def load(config: Any, *overrides: str, reporter: Any = None, quiet: bool = True, plugins: Any = None) -> Pipe:
    """Load a model once for many calls: ``config`` is a YAML path, a model id, a dict or a RunConfig; then
    ``key=value`` overrides as the CLI takes them. Raises :class:`UserError` for anything ``vidax run`` refuses."""
    from vidax_core.plugins import get_plugins
    from vidax_core.runner.loaded import LoadedModel
    from vidax_core.report.progress import Reporter

    plugins = plugins or get_plugins()
    cfg = resolve_config(config, overrides, plugins)
    cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, **NO_OUTPUT))
    model = LoadedModel(cfg, plugins, reporter or Reporter(quiet=quiet))
    return Pipe(model)
