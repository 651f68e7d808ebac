"""HTTP framing and routes: JSON in and out, errors as ``{"error": {...}}``, video bytes with Range support.

Every client mistake is a 4xx whose message carries the UserError's words; a 5xx means a bug in vidax. A client
that goes away mid-request (a short body, a timeout, a reset) only ends its own connection.
"""

from __future__ import annotations

import json
import os
import re
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from vidax_core.errors import UserError
from vidax_core.serve import request as reqmod
from vidax_core.serve.jobs import QueueFull, is_id
from vidax_core.serve.page import render_page


class HttpError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class _ClientGone(Exception):
    """The client closed or stalled its connection before its request was complete."""


_VIDEO = re.compile(r"^/v1/videos/([^/]*)$")
_CONTENT = re.compile(r"^/v1/videos/([^/]*)/content$")
_EXTEND = re.compile(r"^/v1/videos/([^/]*)/extend$")
STREAM_POLL_S = 0.05  # how often a streamed video's growing file is read
STREAM_WAIT_S = 3600.0  # the longest a streamed video's connection waits for its job
_KNOWN_METHODS = ("GET", "POST", "DELETE")


class Handler(BaseHTTPRequestHandler):
    """One connection; ``self.server.app`` is the :class:`vidax_core.serve.app.App` being served."""

    protocol_version = "HTTP/1.1"
    server_version = "vidax"
    timeout = 30  # seconds a client may stall mid-request before its connection is dropped

    # --- dispatch ---
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method: 405, not http.server's 501
            return lambda: self._dispatch(name[3:])
        raise AttributeError(name)

    def _dispatch(self, method: str) -> None:
        self._body_read = False
        try:
            url = urlsplit(self.path)
            route, args = self._route(method, url.path)
            route(*args, query=_query(url.query))
        except HttpError as exc:
            self._error(exc.status, exc.message, exc.code)
        except UserError as exc:
            self._error(400, " ".join(str(exc).split()))
        except QueueFull as exc:
            self._error(429, str(exc), "queue_full")
        except (_ClientGone, ConnectionError, socket.timeout):
            self.close_connection = True
        except Exception as exc:  # a bug: say so without the traceback
            self.server.app.log(f"internal error on {method} {self.path[:200]}: {type(exc).__name__}: {exc}")
            self._error(500, f"internal error ({type(exc).__name__}); please report it", "internal_error")

    def _route(self, method: str, path: str):
        if path in ("/", "/index.html"):
            return self._only(method, "GET", self._page), ()
        if path == "/health":
            return self._only(method, "GET", self._health), ()
        if path == "/v1/models":
            return self._only(method, "GET", self._models), ()
        if path == "/v1/videos":
            if method == "POST":
                return self._create, ()
            return self._only(method, "GET", self._list, "GET or POST"), ()
        m = _CONTENT.match(path) or _EXTEND.match(path) or _VIDEO.match(path)
        if m:
            job_id = m.group(1)
            if not is_id(job_id):
                raise HttpError(400, f"{job_id[:80]!r} is not a video id (ids look like video_ and 32 hex digits)",
                                "invalid_id")
            if m.re is _CONTENT:
                return self._only(method, "GET", self._content), (job_id,)
            if m.re is _EXTEND:
                return self._only(method, "POST", self._extend), (job_id,)
            if method == "DELETE":
                return self._delete, (job_id,)
            return self._only(method, "GET", self._retrieve, "GET or DELETE"), (job_id,)
        raise HttpError(404, f"no such endpoint: {path[:200]} (see /v1/videos, /health and /)", "not_found")

    def _only(self, method: str, allowed: str, route, methods: str | None = None):
        if method == allowed or (method == "HEAD" and allowed == "GET"):
            return route
        raise HttpError(405, f"{method[:20]} is not allowed here; use {methods or allowed}", "method_not_allowed")

    # --- routes ---
    def _page(self, query) -> None:
        app = self.server.app
        self._send(200, render_page(app.page_info()).encode("utf-8"), "text/html; charset=utf-8")

    def _health(self, query) -> None:
        """200 once the model is loaded: the server only listens after ``vidax.load`` has returned."""
        app = self.server.app
        self._json(200, {"status": "ok", "model": app.model_id, **app.jobs.counts()})

    def _models(self, query) -> None:
        app = self.server.app
        self._json(200, {"object": "list", "data": [{"id": app.model_id, "object": "model", "owned_by": "vidax"}]})

    def _create(self, query) -> None:
        app = self.server.app
        body = self._body(app.limits.max_body_bytes)
        ctype = self.headers.get("Content-Type", "")
        kind = ctype.split(";", 1)[0].strip().lower()
        if kind == "multipart/form-data":
            req = reqmod.from_form(body, ctype, app.limits)
        elif kind == "application/x-www-form-urlencoded":
            req = reqmod.from_urlencoded(body, app.limits)
        elif kind in ("application/json", ""):
            req = reqmod.from_json(body, app.limits)
        else:
            raise HttpError(415, f"Content-Type {kind[:80]!r} is not accepted: send application/json, "
                                 "multipart/form-data or application/x-www-form-urlencoded", "unsupported_media_type")
        job = app.create(req)
        self._json(200, job.to_object())

    def _list(self, query) -> None:
        app = self.server.app
        _known_params(query, ("after", "limit", "order"))
        limit_text = query.get("limit", "20")
        if not re.fullmatch(r"\d{1,4}", limit_text) or not 1 <= int(limit_text) <= 100:
            raise UserError(f"limit must be an integer from 1 to 100, got {limit_text[:40]!r}")
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise UserError(f"order must be asc or desc, got {order[:40]!r}")
        after = query.get("after")
        if after is not None and not is_id(after):
            raise UserError(f"after={after[:80]!r} is not a video id")
        jobs, more = app.jobs.page(after, int(limit_text), order)
        data = [j.to_object() for j in jobs]
        self._json(200, {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None, "has_more": more})

    def _retrieve(self, job_id: str, query) -> None:
        self._json(200, self._job(job_id).to_object())

    def _delete(self, job_id: str, query) -> None:
        if not self.server.app.jobs.delete(job_id):
            raise HttpError(404, f"no video with id {job_id}", "not_found")
        self._json(200, {"id": job_id, "object": "video.deleted", "deleted": True})

    def _extend(self, job_id: str, query) -> None:
        """``POST /v1/videos/{id}/extend`` ``{"seconds": N}``: a new job continuing that video (streamed)."""
        app = self.server.app
        body = self._body(app.limits.max_body_bytes)
        values = reqmod.from_json(body, app.limits).values if body.strip() else {}
        self._json(200, app.extend(job_id, values).to_object())

    def _content(self, job_id: str, query) -> None:
        _known_params(query, ("variant", "stream"))
        if query.get("variant", "video") != "video":
            raise UserError(f"variant {query['variant'][:40]!r} is not available; only variant=video is")
        if query.get("stream") not in (None, "0", "1"):
            raise UserError(f"stream must be 1 (the video as it is made) or 0, got {query['stream'][:40]!r}")
        job = self._job(job_id)
        if query.get("stream") == "1":
            return self._stream(job)
        if job.status != "completed":
            raise HttpError(409 if job.status != "failed" else 404,
                            f"video {job_id} is {job.status}" + ("" if job.status == "failed" else
                                                                  "; its content is ready once it is completed"),
                            "not_ready")
        try:
            f = open(job.video_path, "rb")
        except FileNotFoundError:  # deleted in the meantime
            raise HttpError(404, f"no video with id {job_id}", "not_found") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            start, end = _range(self.headers.get("Range"), size)
            self.send_response(206 if self.headers.get("Range") else 200)
            self.send_header("Content-Type", "video/mp4")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(end - start + 1))
            if self.headers.get("Range"):
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def _stream(self, job) -> None:
        """The video as it is made: a fragmented mp4 (it plays from its first bytes) sent with chunked transfer
        encoding while the job writes it, ending when the job ends. A job still queued is waited for; a failed
        job's stream ends where its video stopped."""
        import time

        if job.status == "failed":
            raise HttpError(404, f"video {job.id} failed", "not_ready")
        end = time.monotonic() + STREAM_WAIT_S
        f = None
        while f is None:
            if job.status == "failed" or time.monotonic() > end:
                raise HttpError(404, f"video {job.id} {job.status}", "not_ready")
            if job.status == "completed" or (job.live is not None and job.live.written):
                try:
                    f = open(job.video_path, "rb")
                except FileNotFoundError:
                    if job.status == "completed":
                        raise HttpError(404, f"no video with id {job.id}", "not_found") from None
            if f is None:
                time.sleep(STREAM_POLL_S)
        with f:
            self.send_response(200)
            self.send_header("Content-Type", "video/mp4")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command == "HEAD":
                return
            while True:
                finished = job.status in ("completed", "failed") and (job.live is None or job.live.done)
                data = f.read(1 << 16)
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                elif finished:  # everything written before the job ended has been read
                    break
                else:
                    time.sleep(STREAM_POLL_S)
            self.wfile.write(b"0\r\n\r\n")

    # --- helpers ---
    def _job(self, job_id: str):
        job = self.server.app.jobs.get(job_id)
        if job is None:
            raise HttpError(404, f"no video with id {job_id}", "not_found")
        return job

    def _body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise HttpError(411, "send the request with a Content-Length header (chunked bodies are not accepted)",
                            "length_required")
        text = self.headers.get("Content-Length")
        if text is None:
            raise HttpError(411, "a request body with a Content-Length header is required", "length_required")
        if not re.fullmatch(r"\d{1,15}", text.strip()):
            self.close_connection = True
            raise HttpError(400, f"Content-Length {text[:40]!r} is not a number of bytes", "bad_length")
        length = int(text)
        if length > limit:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            raise HttpError(413, f"the request body has {length} bytes, more than this server's limit of {limit} "
                                 "(--max-body-bytes)", "too_large")
        self._body_read = True
        data = bytearray()
        while len(data) < length:
            chunk = self.rfile.read(min(length - len(data), 1 << 20))
            if not chunk:
                raise _ClientGone()
            data += chunk
        return bytes(data)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json")

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        sent_body = self.headers is not None and (self.headers.get("Content-Length", "0").strip() not in ("", "0")
                                                  or self.headers.get("Transfer-Encoding"))
        if sent_body and not getattr(self, "_body_read", False):
            self.close_connection = True  # an unread body would be taken for the next request
        try:
            self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})
        except (ConnectionError, socket.timeout):
            self.close_connection = True

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def parse_request(self) -> bool:
        """http.server's parse, with HTTP/0.9 refused: its answers carry no status line, so a client could not
        tell an error from a video (a two-word ``GET /path`` line is HTTP/0.9)."""
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            self.send_error(400, "HTTP/0.9 requests are not supported: send HTTP/1.1 or HTTP/1.0 requests")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line, oversized headers) as JSON too; each is the
        client's mistake, so a 4xx (http.server answers an HTTP/2+ request line with 505)."""
        self.close_connection = True
        if code == HTTPStatus.HTTP_VERSION_NOT_SUPPORTED:
            code, message = 400, f"{message or 'unsupported HTTP version'}: send HTTP/1.1 or HTTP/1.0 requests"
        elif code >= 500:
            code = 400
        if getattr(self, "command", None) is None:
            self.command = "GET"
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # answer with a status line, never as HTTP/0.9
        if not hasattr(self, "headers"):
            self.headers = None
        self._error(code, message or HTTPStatus(code).phrase)

    def log_message(self, format: str, *args: Any) -> None:
        self.server.app.log_request(format % args)


def _query(text: str) -> dict[str, str]:
    try:
        parsed = parse_qs(text, keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except ValueError:
        raise UserError("too many query parameters") from None
    out = {}
    for key, values in parsed.items():
        if len(values) > 1:
            raise UserError(f"query parameter {key[:40]!r} is given more than once")
        out[key] = values[0]
    return out


def _known_params(query: dict[str, str], known: tuple[str, ...]) -> None:
    for key in query:
        if key not in known:
            raise UserError(f"unknown query parameter {key[:40]!r}; known: {', '.join(known)}")


def _range(header: str | None, size: int) -> tuple[int, int]:
    """The byte range of a ``Range: bytes=a-b`` header (one range; the whole file without one)."""
    if not header:
        return 0, size - 1
    m = re.fullmatch(r"\s*bytes=(\d{0,15})-(\d{0,15})\s*", header)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        raise HttpError(416, f"Range {header[:60]!r} is not one byte range", "bad_range")
    if m.group(1) == "":  # the last N bytes
        start, end = max(size - int(m.group(2)), 0), size - 1
    else:
        start = int(m.group(1))
        end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    if start >= size or start > end:
        raise HttpError(416, f"Range {header[:60]!r} is outside the video's {size} bytes", "bad_range")
    return start, end
