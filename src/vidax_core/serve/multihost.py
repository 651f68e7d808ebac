"""Under ``jax.distributed``: process 0 serves HTTP and every process runs each job's steps.

The pipe is SPMD: every process must make the same call with the same arguments, at the same time. Process 0's
worker thread therefore broadcasts each job (its call keywords and the bytes of an uploaded image) before calling
the pipe; the other processes sit in :func:`follow`, receive it and make the same call. Cancelling must be agreed
too, or the processes would stop at different steps: each cancel check between steps is a broadcast of process 0's
flag. While the queue is empty process 0 broadcasts an ``idle`` message every few seconds, so no process waits in
one collective for long; ``stop`` ends the followers. Messages are JSON bytes, broadcast with
``jax.experimental.multihost_utils.broadcast_one_to_all`` as a length and then a buffer padded to a power of two
(few distinct shapes, so few compiles).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any, Callable

import numpy as np

from vidax_core.errors import Cancelled, UserError
from vidax_core.serve.jobs import IDLE_S


def process_index() -> int:
    import jax

    return jax.process_index()


def process_count() -> int:
    import jax

    return jax.process_count()


def _broadcast(array: np.ndarray, is_source: bool) -> np.ndarray:
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.broadcast_one_to_all(array, is_source=is_source))


def send(message: dict[str, Any] | None) -> dict[str, Any]:
    """Broadcast ``message`` from process 0 (``None`` on the others); every process returns it."""
    source = message is not None
    data = json.dumps(message).encode("utf-8") if source else b""
    length = int(_broadcast(np.array([len(data)], np.int32), source)[0])
    padded = max(1024, 1 << (length - 1).bit_length())
    buf = np.zeros(padded, np.uint8)
    if source:
        buf[:length] = np.frombuffer(data, np.uint8)
    got = _broadcast(buf, source)
    return json.loads(bytes(got[:length]).decode("utf-8"))


def agreed(flag: bool | None) -> bool:
    """Process 0's ``flag`` on every process (the others pass None)."""
    source = flag is not None
    return bool(_broadcast(np.array([int(bool(flag))], np.int32), source)[0])


def job_message(kwargs: dict[str, Any], image_path: str | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"kind": "job", "kwargs": {k: v for k, v in kwargs.items() if k != "image"}}
    if image_path is not None:
        with open(image_path, "rb") as f:
            msg["image"] = base64.b64encode(f.read()).decode("ascii")
        msg["image_ext"] = os.path.splitext(image_path)[1]
    return msg


class LeaderRunner:
    """Process 0's job runner: broadcast the job, then run it like every other process; while the queue is empty,
    a heartbeat every ``idle_s`` seconds."""

    def __init__(self, pipe: Any, idle_s: float = IDLE_S) -> None:
        self.pipe = pipe
        self.idle_s = idle_s

    def __call__(self, job, on_progress: Callable[[int, int], None]) -> None:
        send(job_message(job.plan.kwargs, job.image_path))
        out = self.pipe.run(job.plan.call, on_progress=on_progress, cancel=lambda: agreed(job.cancel.is_set()))
        out.save(job.video_path)

    def idle(self) -> None:
        send({"kind": "idle"})

    def stop(self) -> None:
        send({"kind": "stop"})


def follow(pipe: Any, workdir: str, log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> None:
    """Processes other than 0: run every job process 0 broadcasts, until it says stop."""
    os.makedirs(workdir, exist_ok=True)
    image_path = None
    while True:
        msg = send(None)
        if msg["kind"] == "stop":
            return
        if msg["kind"] != "job":
            continue
        kwargs = dict(msg["kwargs"])
        if "image" in msg:
            image_path = os.path.join(workdir, f"input-{process_index()}{msg['image_ext']}")
            with open(image_path, "wb") as f:
                f.write(base64.b64decode(msg["image"]))
            kwargs["image"] = image_path
        try:
            pipe(**kwargs, cancel=lambda: agreed(None))
        except (UserError, Cancelled):
            pass  # process 0 reports it to the client
        except Exception as exc:  # process 0 fails the job; this process keeps following
            log(f"process {process_index()}: job failed: {type(exc).__name__}: {exc}")
        finally:
            if image_path is not None and os.path.exists(image_path):
                os.remove(image_path)
