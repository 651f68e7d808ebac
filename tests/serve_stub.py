"""Helpers of the serve tests: the real tiny pipe (:func:`load_pipe`), HTTP calls, and a stand-in pipe.

The stand-in (:class:`StubPipe`) has ``vidax.load``'s pipe interface for what the tiny model cannot show (calls
that fail on purpose, recording calls across processes). Its ``resolve`` is the real config resolution and
pre-load checks of ``vidax run`` on the demo config; its call sleeps ``step_s`` per step, reports progress, honours
``cancel`` between steps, and makes noise frames that ``save`` writes with the real mp4 writer.
"""

from __future__ import annotations

import os

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidax_core import config as config_mod
from vidax_core.config.scope import SAMPLING_KEYS
from vidax_core.errors import UserError
from vidax_core.plugins import get_plugins
from vidax_core.runner.preflight import preflight
from vidax_core.errors import Cancelled

CALL_KEYS = SAMPLING_KEYS


@dataclass
class Out:
    frames: np.ndarray
    fps: int

    def save(self, path: str) -> None:
        from vidax_core.io.video import write_mp4

        write_mp4(path, self.frames[0], self.fps)


@dataclass
class StubCall:
    """The stand-in's planned call: its config and the keywords it runs with."""

    cfg: Any
    kwargs: dict


class StubPipe:
    def __init__(self, config: str, *overrides: str, step_s: float = 0.01) -> None:
        self._plugins = get_plugins()
        self._yaml, self._overrides = config, list(overrides)
        self.config = config_mod.resolve(config, self._overrides, self._plugins.preset_for)
        self.spec = self._plugins.registry.get(self.config.model.id)
        self.fps = int(self.config.output.fps)
        self.step_s = step_s
        self.calls = 0
        self._busy = threading.Lock()

    def resolve(self, **kw: Any):
        items = []
        for key, value in kw.items():
            if key in CALL_KEYS:
                items.append(f"sampling.{key}={value}")
            elif key in ("prompt", "negative_prompt", "image", "video"):
                items.append(f"{key}={value}")
            else:
                raise UserError(f"{key} is not a call argument")
        cfg = config_mod.resolve(self._yaml, [*self._overrides, *items], self._plugins.preset_for)
        preflight(cfg, self.spec, self._plugins, check_outputs=False)
        return cfg

    def prepare(self, **kw: Any) -> "StubCall":
        return StubCall(self.resolve(**kw), dict(kw))

    def run(self, call: "StubCall", on_progress=None, cancel=None, on_decode=None) -> Out:
        extra = {"on_decode": on_decode} if on_decode is not None else {}  # as a caller without one calls it
        return self(**call.kwargs, on_progress=on_progress, cancel=cancel, **extra)

    def accepts(self, **kw: Any) -> bool:
        try:
            self.resolve(**kw)
            return True
        except UserError:
            return False

    def frames_for_seconds(self, seconds: float) -> int:
        n = int(np.ceil(seconds * self.fps))
        n = n + (1 - n) % 4  # the Wan rule: 4k + 1
        return n

    def __call__(self, on_progress=None, cancel=None, on_decode=None, **kw: Any) -> Out:
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("two calls at once")
        try:
            cfg = self.resolve(**kw)
            s = cfg.sampling
            for i in range(s.num_steps):
                if cancel is not None and (cancel() if callable(cancel) and not hasattr(cancel, "is_set")
                                           else cancel.is_set()):
                    raise Cancelled()
                time.sleep(self.step_s)
                if on_progress:
                    on_progress(i + 1, s.num_steps)
            for k in range(2):  # the decode, in two chunks
                time.sleep(self.step_s)
                if on_decode:
                    on_decode(k + 1, 2)
            self.calls += 1
            rng = np.random.default_rng(s.seed)
            return Out(rng.random((1, s.num_frames, s.height, s.width, 3), np.float32), self.fps)
        finally:
            self._busy.release()

    def close(self) -> None:
        pass


# --- helpers the serve tests share ---
import http.client  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import urllib.parse  # noqa: E402

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")

TINY = ("sampling.height=32", "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2",
        "sampling.max_sequence_length=16")


def request(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
            timeout: float = 60.0) -> tuple[int, dict, bytes]:
    """One HTTP request on a fresh connection: (status, headers, body)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def post_json(url: str, fields: dict) -> tuple[int, dict]:
    status, _, body = request(url, "POST", "/v1/videos", json.dumps(fields).encode(),
                              {"Content-Type": "application/json"})
    return status, json.loads(body)


def wait_done(url: str, job_id: str, timeout: float = 120.0) -> dict:
    """Poll a job until it is completed or failed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status, _, body = request(url, "GET", f"/v1/videos/{job_id}")
        assert status == 200, body
        obj = json.loads(body)
        if obj["status"] in ("completed", "failed"):
            return obj
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def load_pipe(*overrides: str):
    """The pipe the serve tests run: ``vidax.load`` on the built-in tiny model, a short recipe."""
    import vidax

    return vidax.load(DEMO_CONFIG, "model.checkpoint=builtin:tiny-random", *TINY, *overrides)


def form(fields: dict, files: dict | None = None) -> tuple[bytes, str]:
    """A multipart/form-data body laid out as httpx (the OpenAI SDK's client) lays one out."""
    boundary = "a1b2c3d4e5f6"
    out = b""
    for name, value in fields.items():
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n').encode()
    for name, (filename, data, ctype) in (files or {}).items():
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def png(size=(32, 32), seed: int | None = None) -> bytes:
    """A PNG image: one colour, or with ``seed`` random pixels of that seed."""
    from PIL import Image

    buf = io.BytesIO()
    if seed is None:
        Image.new("RGB", size, (200, 30, 10)).save(buf, format="PNG")
    else:
        pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()
