"""The job queue: FIFO, one job at a time on one worker thread (pipe calls are not thread-safe), with cancel.

A job's record lives here from its creation until it is deleted (or evicted as one of the oldest finished jobs
beyond ``Limits.max_jobs_kept``); once the job ends it keeps only what the video object reports (the planned
call, its config and arrays, are dropped), so a thousand kept records cost little. Its video is
``<output dir>/<job id>.mp4``. Whatever a job does, the worker
survives it: a UserError fails the job with its words, any other exception fails it as an internal error.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from vidax_core.errors import Cancelled, UserError
from vidax_core.report import memory
from vidax_core.serve.request import Plan

ID_PREFIX = "video_"
SAMPLED, WRITTEN = 90, 100  # a job's progress once its steps are done, once its mp4 is written
IDLE_S = 5.0  # a runner with an idle() hook (the multi-host leader) is called this often while nothing waits


class QueueFull(Exception):
    """The queue holds ``max_queue`` waiting jobs already (the server answers 429)."""


def new_id() -> str:
    return ID_PREFIX + uuid.uuid4().hex


def is_id(text: str) -> bool:
    return (len(text) == len(ID_PREFIX) + 32 and text.startswith(ID_PREFIX)
            and all(c in "0123456789abcdef" for c in text[len(ID_PREFIX):]))


@dataclass
class Job:
    id: str
    model: str
    plan: Plan
    video_path: str
    image_path: str | None = None
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: str = "queued"  # queued | in_progress | completed | failed
    progress: int = 0  # of the whole job: the steps up to 90, the decode up to 99, 100 once the mp4 is written
    phase: str = "queued"  # queued | sampling | decoding | writing | done
    decode_progress: int = 0  # percent of the VAE's chunks decoded
    completed_at: int | None = None
    error: dict[str, str] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    streaming: bool = False  # a chunk-by-chunk model: its mp4 is written (and streamed) as its chunks are made
    chunks_done: int = 0
    chunks_total: int = 0
    frames_ready: int = 0  # frames in the mp4 so far
    live: Any = None  # the growing mp4 (vidax_core.io.video.Mp4Stream) while a streaming job runs
    extends: str | None = None  # the job whose video this one continues
    continued: Any = None  # that job's kept state (vidax_core.causal.session.CausalSession), None: from its frames

    def chunk(self, frames: int, k: int, n: int) -> None:
        """A streaming job's chunk ``k`` of ``n`` is in its mp4, ``frames`` more frames."""
        self.phase = "sampling" if k + 1 < n else "writing"
        self.chunks_done, self.chunks_total = k + 1, n
        self.frames_ready += int(frames)

    def step(self, done: int, total: int) -> None:
        """``on_progress`` of the pipe call: ``done`` of ``total`` denoising steps."""
        if total > 0:
            self.phase = "sampling"
            self.progress = max(self.progress, min(SAMPLED - 1, SAMPLED * done // total))

    def decoding(self, done: int, total: int) -> None:
        """``on_decode`` of the pipe call: ``done`` of ``total`` VAE chunks."""
        if total > 0:
            self.phase = "decoding"
            self.decode_progress = min(100, 100 * done // total)
            self.progress = max(self.progress,
                                SAMPLED + min(WRITTEN - SAMPLED - 1, (WRITTEN - SAMPLED) * done // total))

    def writing(self) -> None:
        """The frames are decoded; the mp4 is being written."""
        self.phase, self.decode_progress, self.progress = "writing", 100, max(self.progress, WRITTEN - 1)

    def to_object(self) -> dict[str, Any]:
        """The OpenAI video object (plus vidax's ``num_frames``, ``num_steps``, ``fps``, ``phase`` and
        ``decode_progress``)."""
        return {
            "id": self.id, "object": "video", "model": self.model, "status": self.status,
            "progress": self.progress, "created_at": self.created_at, "completed_at": self.completed_at,
            "expires_at": None, "size": self.plan.size, "seconds": self.plan.seconds, "prompt": self.plan.prompt,
            "remixed_from_video_id": None, "error": self.error, "num_frames": self.plan.num_frames,
            "num_steps": self.plan.num_steps, "fps": self.plan.fps, "phase": self.phase,
            "decode_progress": self.decode_progress, **self._streaming(),
        }

    def _streaming(self) -> dict[str, Any]:
        """A streaming job's chunks so far and where its video plays while it is made."""
        if not self.streaming:
            return {}
        return {"chunks_done": self.chunks_done, "chunks_total": self.chunks_total,
                "frames_ready": self.frames_ready, "stream_url": f"/v1/videos/{self.id}/content?stream=1",
                "extends": self.extends}


class JobQueue:
    """Jobs by id in creation order, the waiting ones in a FIFO, and the worker thread that runs them.

    ``run(job, on_progress)`` does one job's work (the pipe call and the write of ``job.video_path``; it may report
    the decode with ``job.decoding`` and the write with ``job.writing``); it is
    the only place the pipe is touched, always from the worker thread. ``idle()`` is called on that thread every
    ``idle_s`` seconds while nothing waits, ``on_stop()`` once when it ends (the multi-host heartbeat and stop).
    """

    def __init__(self, run: Callable[[Job, Callable[[int, int], None]], None], max_queue: int,
                 max_jobs_kept: int, log: Callable[[str], None] = lambda m: None,
                 idle: Callable[[], None] | None = None,
                 idle_s: float = IDLE_S, on_stop: Callable[[], None] | None = None) -> None:
        self._run = run
        self.max_queue = max_queue
        self.max_jobs_kept = max_jobs_kept
        self._log = log
        self._idle, self._idle_s, self._on_stop = idle, idle_s, on_stop
        self._jobs: dict[str, Job] = {}  # insertion order = creation order
        self._waiting: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.running: Job | None = None
        self._thread = threading.Thread(target=self._work, name="vidax-serve-worker", daemon=True)
        self._thread.start()

    # --- requests (any handler thread) ---
    def submit(self, job: Job) -> None:
        with self._cond:
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} jobs waiting); retry later")
            self._jobs[job.id] = job
            self._waiting.append(job)
            self._cond.notify()

    def get(self, job_id: str) -> Job | None:
        with self._cond:
            return self._jobs.get(job_id)

    def delete(self, job_id: str) -> bool:
        """Forget a job: a waiting one leaves the queue, a running one is cancelled at its next step, a finished
        one's video is removed. False when there is no such job."""
        with self._cond:
            job = self._jobs.pop(job_id, None)
            if job is None:
                return False
            job.cancel.set()
            if job in self._waiting:
                self._waiting.remove(job)
            running = job is self.running
        if not running:  # the worker cleans up after a running job once its call returns
            _remove(job.video_path, job.image_path)
        return True

    def page(self, after: str | None, limit: int, order: str) -> tuple[list[Job], bool]:
        """One page of the cursor list: jobs after ``after`` in ``order`` and whether more follow."""
        with self._cond:
            jobs = list(self._jobs.values())
        if order == "desc":
            jobs.reverse()
        if after is not None:
            ids = [j.id for j in jobs]
            if after not in ids:
                raise UserError(f"after={after!r} is not the id of a listed video")
            jobs = jobs[ids.index(after) + 1:]
        return jobs[:limit], len(jobs) > limit

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {"queued": len(self._waiting), "running": int(self.running is not None)}

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel what runs and waits, and end the worker."""
        with self._cond:
            self._stopping = True
            for job in list(self._waiting) + ([self.running] if self.running else []):
                job.cancel.set()
            self._cond.notify_all()
        self._thread.join(timeout)

    # --- the worker thread ---
    def _work(self) -> None:
        try:
            self._loop()
        finally:
            if self._on_stop is not None:
                self._on_stop()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopping:
                    if not self._cond.wait(self._idle_s if self._idle else None) and self._idle:
                        self._idle()
                if self._stopping:
                    return
                job = self._waiting.popleft()
                self.running = job
                job.status = "in_progress"
            self._one(job)
            job.plan = job.plan.finished()  # the record keeps what the video object reports, not the call
            with self._cond:
                self.running = None
                gone = job.id not in self._jobs
                self._evict()
            if gone:
                _remove(job.video_path, job.image_path)
            memory.give_back()  # the job's frames and buffers, freed, go back to the OS

    def _one(self, job: Job) -> None:
        t0 = time.perf_counter()
        try:
            self._run(job, job.step)
        except Cancelled:
            self._finish(job, "failed", {"code": "cancelled", "message": "the job was cancelled"})
        except UserError as exc:
            self._finish(job, "failed", {"code": "invalid_request", "message": " ".join(str(exc).split())})
        except Exception as exc:  # a bug in a job must not take the server down; the job says what happened
            first = (str(exc).splitlines() or [""])[0][:300]
            self._finish(job, "failed", {"code": "internal_error",
                                         "message": f"internal error ({type(exc).__name__}: {first})"})
        else:
            job.progress, job.phase = 100, "done"
            self._finish(job, "completed", None)
        self._log(job_line(job, time.perf_counter() - t0))

    def _finish(self, job: Job, status: str, error: dict[str, str] | None) -> None:
        job.error = error
        job.completed_at = int(time.time())
        job.status = status

    def _evict(self) -> None:
        finished = [j for j in self._jobs.values() if j.status in ("completed", "failed")]
        for job in finished[: max(len(finished) - self.max_jobs_kept, 0)]:
            del self._jobs[job.id]
            _remove(job.video_path, job.image_path)


def job_line(job: Job, seconds: float) -> str:
    """The server log's one line about a finished job."""
    p = job.plan
    what = f"{p.size}, {p.num_frames} frames, {p.num_steps} steps" + (", with an upload" if job.image_path else "")
    if job.status == "completed":
        return f"job {job.id} completed in {seconds:.1f} s ({what})"
    return f"job {job.id} failed after {seconds:.1f} s ({what}): {job.error['code']}: {job.error['message'][:200]}"


def _remove(*paths: str | None) -> None:
    for path in paths:
        if path:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
