"""Wiring: one loaded pipe, its job queue, the limits and the output folder behind a ThreadingHTTPServer.

The server writes only inside its output folder, and only files named after job ids it made itself
(``<id>.mp4``, ``<id>.input.<ext>``); nothing a request says becomes part of a path.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Callable

from vidax_core.errors import UserError
from vidax_core.io.outputs import write_atomic
from vidax_core.report import memory
from vidax_core.serve import jobs as jobsmod
from vidax_core.serve import request as reqmod
from vidax_core.serve.handler import Handler
from vidax_core.serve.jobs import Job, JobQueue, QueueFull
from vidax_core.serve.limits import Limits


def run_locally(pipe: Any, keep: Callable[[Job, Any], None] | None = None
                ) -> Callable[[Job, Callable[[int, int], None]], None]:
    """A job's work on one process: the call planned when the job was posted, then the mp4 write. A streaming
    job (a chunk-by-chunk model) writes its mp4 as its chunks come, a fragmented mp4 the content endpoint streams
    while it grows; a causal model's job keeps its KV cache (``keep(job, session)``) for a continuation."""

    def run(job: Job, on_progress: Callable[[int, int], None]) -> None:
        if not job.streaming:
            out = pipe.run(job.plan.call, on_progress=on_progress, cancel=job.cancel, on_decode=job.decoding)
            job.writing()
            out.save(job.video_path)
            return
        from vidax_core.io.video import Mp4Stream

        job.live = video = Mp4Stream(job.video_path, job.plan.fps, in_place=True)

        def on_chunk(frames, k, n):
            video.append(frames[0])
            job.chunk(frames.shape[1], k, n)

        try:
            out = pipe.run(job.plan.call, on_progress=on_progress, cancel=job.cancel, on_chunk=on_chunk,
                           keep_cache=keep is not None and pipe.continues, extend=job.continued)
            video.commit()
        except BaseException:
            video.abort()
            raise
        finally:
            job.continued = None
        if keep is not None and out.session is not None:
            keep(job, out.session)

    return run


class App:
    """What the handlers share: the pipe's description, the queue, the limits, the output folder."""

    def __init__(self, pipe: Any, output_dir: str, limits: Limits, runner=None, quiet: bool = False,
                 log_requests: bool = False, upload_required: bool = False, keep_cache: bool = True) -> None:
        self.pipe = pipe
        self.upload_required = upload_required  # an image-to-video model loaded with no image of its own
        self.model_id = str(pipe.spec.id)
        self.output_dir = os.path.abspath(output_dir)
        os.makedirs(self.output_dir, exist_ok=True)
        self.limits = limits
        self.quiet, self._log_requests = quiet, log_requests
        self._resolve_lock = threading.Lock()
        self.kept: tuple[str, Any] | None = None  # (job id, its kept causal state): what a continuation reuses
        self.local = runner is None  # the jobs run in this process (not broadcast to many hosts)
        runner = runner or run_locally(pipe, self._keep if keep_cache else None)
        self.jobs = JobQueue(runner, limits.max_queue, limits.max_jobs_kept, self.log,
                             idle=getattr(runner, "idle", None), idle_s=getattr(runner, "idle_s", jobsmod.IDLE_S),
                             on_stop=getattr(runner, "stop", None))
        self._page_info = page_info(pipe, limits, upload_required)

    def create(self, req: reqmod.VideoRequest) -> Job:
        """Check ``req``, queue its job and return it (UserError / QueueFull for the handler to answer)."""
        if self.jobs.counts()["queued"] >= self.limits.max_queue:
            raise QueueFull(f"the queue is full ({self.limits.max_queue} jobs waiting); retry later")
        if self.upload_required and req.image is None:
            raise UserError(f"input_reference is required: {self.model_id} makes video from an image; upload the "
                            "first frame (multipart/form-data)")
        job_id = jobsmod.new_id()
        image_path = None
        try:
            if req.image is not None:
                image_path = os.path.join(self.output_dir, f"{job_id}.input.{req.image.ext}")
                write_atomic(image_path, lambda tmp: _write_bytes(tmp, req.image.data))
            with self._resolve_lock:
                try:
                    plan = reqmod.plan(req, self.pipe, self.limits, image_path, self.model_id)
                except UserError as exc:  # the client sees its upload by its field name, never a server path
                    raise UserError(_hide_paths(str(exc), image_path, self.output_dir)) from None
            job = Job(job_id, self.model_id, plan, os.path.join(self.output_dir, f"{job_id}.mp4"), image_path,
                      streaming=self.streams)
            self.jobs.submit(job)
            return job
        except BaseException:
            jobsmod._remove(image_path)
            raise
        finally:
            memory.give_back()  # the upload's checks decoded it on this handler thread: its pages go back

    @property
    def streams(self) -> bool:
        return bool(getattr(self.pipe, "streams", False))

    def _keep(self, job: Job, session: Any) -> None:
        self.kept = (job.id, session)

    def extend(self, job_id: str, values: dict[str, Any]) -> Job:
        """A job that continues ``job_id``'s video by ``seconds`` (or ``num_frames``) more (its own ``prompt``,
        ``seed`` and ``num_steps`` optional): over the kept KV cache when that job's is the one kept, else from the
        video's last frames (a video-to-video continuation, whose video starts with them)."""
        old = self.jobs.get(job_id)
        if old is None:
            raise UserError(f"no video with id {job_id}")
        if not getattr(self.pipe, "continues", False):
            raise UserError(f"{self.model_id} keeps no cache between chunks: it cannot continue a video")
        if not self.local:
            raise UserError("this server runs its jobs over many hosts, where continuing a video is not offered: "
                            "post a video-to-video request with the video's last frames instead")
        if old.status != "completed":
            raise UserError(f"video {job_id} is {old.status}: a video is continued once it is completed")
        unknown = sorted(set(values) - {"seconds", "num_frames", "prompt", "negative_prompt", "seed", "num_steps"})
        if unknown:
            raise UserError(f"unknown field {unknown[0]!r}; a continuation takes seconds or num_frames, and "
                            "optionally prompt, negative_prompt, seed, num_steps")
        kwargs = {k: values[k] for k in ("negative_prompt", "seed", "num_steps") if k in values}
        prompt = str(values.get("prompt") or old.plan.prompt)
        if self.jobs.counts()["queued"] >= self.limits.max_queue:
            raise QueueFull(f"the queue is full ({self.limits.max_queue} jobs waiting); retry later")
        kept = self.kept[1] if self.kept is not None and self.kept[0] == job_id else None
        new_id = jobsmod.new_id()
        with self._resolve_lock:
            if kept is not None and not kept.closed:
                call = self.pipe.prepare_continuation(seconds=values.get("seconds"),
                                                      num_frames=values.get("num_frames"), prompt=prompt,
                                                      **{**_carried(old.plan.kwargs), **kwargs})
                added = int(call.cfg.sampling.num_frames) - 1
                fps = int(call.cfg.output.fps or self.pipe.fps)
                plan = reqmod.Plan(prompt, {"prompt": prompt, **kwargs}, old.plan.size,
                                   reqmod._seconds_text(added, fps), added, int(call.cfg.sampling.num_steps), fps, call)
                image_path = None
            else:  # the kept state is gone: condition on the video's last frames instead
                image_path = os.path.join(self.output_dir, f"{new_id}.input.mp4")
                clip = _tail_clip(old.video_path, image_path)
                added = _added(self.pipe, values)
                req = reqmod.VideoRequest({"prompt": prompt, "num_frames": clip + added, **kwargs,
                                           **_carried(old.plan.kwargs, ("width", "height"))})
                req.image = reqmod.Upload(b"", "mp4", "video")
                plan = reqmod.plan(req, self.pipe, self.limits, image_path, self.model_id)
                kept = None
        job = Job(new_id, self.model_id, plan, os.path.join(self.output_dir, f"{new_id}.mp4"), image_path,
                  streaming=True, extends=job_id, continued=kept)
        self.jobs.submit(job)
        return job

    def page_info(self) -> dict[str, Any]:
        return self._page_info

    def log(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def log_request(self, message: str) -> None:
        if self._log_requests:
            self.log(message)

    def close(self) -> None:
        self.jobs.stop()


def _carried(kwargs: dict[str, Any], keys: tuple[str, ...] = ("width", "height", "guidance_scale", "num_steps")
             ) -> dict[str, Any]:
    """The call arguments of the job a continuation continues that it keeps (its size and guidance)."""
    return {k: kwargs[k] for k in keys if k in kwargs}


def _added(pipe: Any, values: dict[str, Any]) -> int:
    """The frames a continuation adds (``seconds`` or ``num_frames``), a whole number of 4-frame groups."""
    return pipe._added_frames(values.get("seconds"), values.get("num_frames"))


def _tail_clip(video_path: str, out_path: str, latent_frames: int = 3) -> int:
    """The last ``4 n + 1`` frames (``n = latent_frames``) of ``video_path`` written to ``out_path`` as an mp4;
    returns how many (fewer for a shorter video)."""
    from vidax_core.io.clip import read_video
    from vidax_core.io.video import write_mp4

    frames = read_video(video_path)
    n = min(4 * latent_frames + 1, (len(frames) - 1) // 4 * 4 + 1)
    write_mp4(out_path, frames[-n:], 16)
    return n


def page_info(pipe: Any, limits: Limits, upload_required: bool = False) -> dict[str, Any]:
    """What the page offers: the config's defaults, a size step and the frame counts the model accepts (by its
    own rules, ``pipe.accepts``: no call is planned), within the server's limits, and which uploads the model
    takes (an image: required when it makes video only from one; a clip)."""
    base = pipe.config
    s = base.sampling
    fps = int(base.output.fps or pipe.fps)
    defaults = {"prompt": base.prompt, "negative_prompt": base.negative_prompt, "width": s.width,
                "height": s.height, "num_frames": s.num_frames, "num_steps": s.num_steps, "seed": s.seed,
                "guidance_scale": s.guidance_scale}
    from vidax_core.runner.preflight import IMAGE_TASKS, VIDEO_TASKS

    tasks = tuple(pipe.spec.tasks)
    size_step = next((k for k in (1, 2, 4, 8, 16, 32, 64, 128)
                      if pipe.accepts(width=s.width + k, height=s.height + k)), 16)
    top = min(limits.max_frames, max(4 * (s.num_frames or 0), 33), 257)  # null: the model predicts it
    frames = [n for n in range(1, top + 1) if pipe.accepts(num_frames=n)] or [s.num_frames]
    max_side = max(size_step, 2 * math.isqrt(limits.max_pixels) // size_step * size_step)
    return {"model": str(pipe.spec.id), "fps": fps, "defaults": defaults, "size_step": size_step,
            "frame_choices": frames, "max_side": max_side, "max_steps": limits.max_steps,
            "max_prompt_chars": limits.max_prompt_chars, "takes_image": any(t in IMAGE_TASKS for t in tasks),
            "needs_image": upload_required,
            "takes_video": any(t in VIDEO_TASKS for t in tasks),
            "streams": bool(getattr(pipe, "streams", False)), "continues": bool(getattr(pipe, "continues", False))}


def _hide_paths(message: str, image_path: str | None, output_dir: str) -> str:
    """``message`` with the uploaded image's server path named ``input_reference`` and the output folder hidden."""
    if image_path:
        message = message.replace(repr(image_path), "input_reference").replace(image_path, "input_reference")
    return message.replace(output_dir, "<output folder>")


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that breaks outside a route (a reset while reading the request line): that client's
        business only; anything else is logged in one line instead of socketserver's traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        self.app.log(f"connection from {client_address[0]} failed: {type(exc).__name__}: {exc}")


class Server:
    """``vidax serve`` in-process: ``Server(pipe).start()`` serves on a background thread, ``close()`` ends it.

    ``port=0`` takes a free port (see ``.port`` / ``.url``). The output folder defaults to the folder of the
    pipe's ``output.path``, or ``out`` when the pipe has none (``vidax.load`` clears it: calls write nothing).
    """

    def __init__(self, pipe: Any, *, host: str = "127.0.0.1", port: int = 8000, output_dir: str | None = None,
                 limits: Limits | None = None, runner=None, quiet: bool = False, log_requests: bool = False,
                 upload_required: bool = False, keep_cache: bool = True) -> None:
        if output_dir is None:
            path = pipe.config.output.path
            output_dir = (os.path.dirname(str(path)) or ".") if path else "out"
        self.app = App(pipe, output_dir, limits or Limits(), runner, quiet, log_requests, upload_required,
                       keep_cache)
        try:
            self.httpd = _HTTPServer((host, port), Handler)
        except OSError as exc:
            self.app.close()
            raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port or "
                            "--host") from None
        self.httpd.app = self.app
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def start(self) -> "Server":
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="vidax-serve-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.5)

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(10)
        self.httpd.server_close()
        self.app.close()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
