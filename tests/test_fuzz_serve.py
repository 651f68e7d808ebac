"""Property-based fuzzing of ``vidax serve``: request lines and headers sent raw over a socket, and
create-request bodies (JSON, multipart form data, url-encoded) with drawn fields and values.

The server is the real one around the tiny Wan pipe (its requests are checked by ``pipe.resolve``, as in
production); an accepted job runs only as far as its denoiser traced abstractly at the job's latent grid (a
stand-in runner), so an input costs one request and a trace. The contract, per request: an answer whose status is
not 5xx (a 4xx is the client's mistake: counted as a user error, with its message on one line), within the time
limit, and an accepted job that completes; and the server still answers ``/health`` after the campaign.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serve_stub import form, load_pipe, png, request, wait_done
from test_fuzz_contract import Outcomes, check_contract, fuzz_settings, report_all
from vidax_core.errors import UserError
from vidax_core.serve import Limits, Server
from vidax_core.serve.request import FIELDS

OUTCOMES = {name: Outcomes(name) for name in ("serve request line", "serve body")}


def traced(pipe):
    """A job runner that plans the job's call as the pipe would and traces its denoiser at the latent grid."""
    from test_fuzz_api import _abstract_call

    def run(job, on_progress):
        plan = job.plan.call  # the plan the pipe made when the request was posted
        cfg = plan.cfg
        _abstract_call(pipe._model.builds[0], plan.grids[0], int(cfg.sampling.max_sequence_length))

    return run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pipe = load_pipe()
    root = tmp_path_factory.mktemp("fuzz_serve")
    with Server(pipe, port=0, output_dir=str(root / "out"), quiet=True, runner=traced(pipe),
                limits=Limits(max_body_bytes=1 << 20, max_queue=10_000)) as srv:
        yield srv
        status, _, body = request(srv.url, "GET", "/health")
        assert status == 200, body  # up through the whole campaign
        outside = [p for p in os.listdir(root) if p != "out"]
        assert not outside, outside  # nothing written beside the output folder
    pipe.close()
    report_all(OUTCOMES.values())


class _ServerError(AssertionError):
    """A 5xx answer, or none: a bug in vidax."""


def _judge(status: int, body: bytes, head: bool = False) -> None:
    """Raise UserError for a 4xx (its message must be one line), _ServerError for a 5xx or a broken answer. An
    answer to HEAD has no body."""
    if status >= 500 or status < 100:
        raise _ServerError(f"{status}: {body[:200]!r}")
    if status >= 400 and head and not body:
        raise UserError(f"status {status}")
    if status >= 400:
        try:
            message = json.loads(body)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            raise _ServerError(f"{status} without a JSON error: {body[:200]!r}") from None
        raise UserError(message)


def _raw(url: str, data: bytes, timeout: float = 8.0) -> tuple[int, bytes] | None:
    """Send ``data`` as it is on a fresh connection, half-close, and read the first answer (its status and
    ``Content-Length`` body: bytes sent after a complete request are the next request on a kept-alive connection).
    None when the server closed the connection without answering."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    reply = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before the whole input was sent
            pass
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
    if not reply:
        return None
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise _ServerError(f"not an HTTP answer: {reply[:120]!r}")
    length = next((int(v) for k, _, v in (line.partition(b":") for line in lines[1:])
                   if k.strip().lower() == b"content-length" and v.strip().isdigit()), len(body))
    return int(parts[1]), body[:length]


METHODS = st.sampled_from([b"GET"] * 6 + [b"POST", b"DELETE", b"HEAD", b"PUT", b"OPTIONS", b"PATCH", b"TRACE",
                           b"CONNECT", b"get", b"G\x00T", b"", b"X" * 300])
PATHS = st.one_of(st.sampled_from([b"/", b"/health", b"/v1/models", b"/v1/videos", b"/v1/videos?limit=0",
                                   b"/v1/videos?limit=2&order=asc", b"/v1/videos/video_" + b"0" * 32,
                                   b"/v1/videos/video_" + b"0" * 32 + b"/content?variant=x", b"/v1/videos/..%2f..",
                                   b"/../../etc/passwd", b"*", b"http://x/health", b"/%ff", b"/" + b"a" * 70000,
                                   b"/v1/videos?" + b"&".join(b"a%d=1" % i for i in range(30))]),
                  st.binary(max_size=40))
VERSIONS = st.sampled_from([b"HTTP/1.1"] * 8 + [b"HTTP/1.0", b"HTTP/9.9", b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1.x",
                            b"HTTPS/1.1", b"", b"HTTP/1.1 extra", b"HTTP/01.01", b"HTTP/1.1\x00"])
HEADERS = st.lists(st.one_of(
    st.sampled_from([b"Host: x", b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: 99999999999999999",
                     b"Content-Length: x", b"Transfer-Encoding: chunked", b"Content-Type: application/json",
                     b"Content-Type: multipart/form-data; boundary=", b"Range: bytes=5-1", b"Range: bytes=0-",
                     b"Connection: keep-alive", b"Expect: 100-continue", b"X: " + b"y" * 70000, b"no colon",
                     b" leading: space"]),
    st.binary(max_size=30)), max_size=3)


@settings(**fuzz_settings(default=20))
@given(method=METHODS, path=PATHS, version=VERSIONS, headers=HEADERS, body=st.binary(max_size=40),
       sep=st.sampled_from([b"\r\n", b"\n", b"\r"]))
def test_request_line_contract(server, method, path, version, headers, body, sep):
    data = b" ".join(p for p in (method, path, version) if p) + sep + sep.join(headers) + (sep if headers else b"") \
        + sep + body

    def send():
        answer = _raw(server.url, data)
        if answer is None:
            raise UserError("the connection was closed without an answer")  # http.server: an empty request line
        head = method.upper() == b"HEAD"  # its answer has a Content-Length but no body
        _judge(answer[0], b"" if head else answer[1], head=head)

    check_contract(OUTCOMES["serve request line"], send, label=repr(data[:300]))


VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 2, 5, 17, 33, 2**63, -(2**63), 10**30, 0.5, 1e308, -0.0, "", "a fox",
                     "832x480", "1920x1088", "32x32", "0x0", "99999x99999", "32X32 ", "4", "1e3", "NaN", "inf", "soon",
                     "wan2.1-t2v-1.3b", "other-model", "\u0000", "\ud7ff", [], [1], {}, {"a": 1}, "x" * 300]),
    st.integers(), st.floats(), st.text(max_size=10))
NAMES = st.one_of(st.sampled_from(list(FIELDS) + ["promt", "input_reference[image_url]", "n", "", "seed "]),
                  st.text(max_size=8))


@st.composite
def bodies(draw):
    """(content type, body) of a create request."""
    fields = draw(st.dictionaries(NAMES, VALUES, max_size=5))
    if draw(st.integers(0, 3)):
        fields.setdefault("prompt", "a fox")
    kind = draw(st.sampled_from(["json", "json", "form", "urlencoded", "raw"]))
    if kind == "json":
        text = json.dumps(fields, allow_nan=True) if draw(st.integers(0, 5)) else draw(st.sampled_from(
            ["[1]", "null", '{"prompt": ', '{"prompt": NaN}', "[" * 5000, '"x"', '{"a": 1, "a": 2}']))
        return draw(st.sampled_from(["application/json", "", "application/json; charset=utf-8"])), \
            text.encode("utf-8", "surrogatepass")
    if kind == "form":
        files = None
        if draw(st.booleans()):
            files = {"input_reference": draw(st.sampled_from([("a.png", png(), "image/png"),
                                                              ("a.png", b"not an image", "image/png"),
                                                              ("a.png", png()[:40], "image/png"), ("", b"", "")]))}
        body, ctype = form({k: str(v) for k, v in fields.items() if "\r" not in k and '"' not in k}, files)
        if draw(st.integers(0, 4)) == 0:
            cut = draw(st.integers(0, len(body)))
            body = body[:cut]
        return draw(st.sampled_from([ctype, ctype + "x", "multipart/form-data",
                                     "multipart/form-data; boundary=\"\""])), body
    if kind == "urlencoded":
        from urllib.parse import urlencode

        return "application/x-www-form-urlencoded", urlencode({str(k): str(v) for k, v in fields.items()}).encode(
            "utf-8", "surrogatepass") + draw(st.sampled_from([b"", b"&&", b"%zz", b"=x", b"\xff"]))
    return (draw(st.sampled_from(["text/plain", "application/xml", "image/png", "x/y; a=\"b\""])),
            draw(st.binary(max_size=64)))


@settings(**fuzz_settings(default=20))
@given(payload=bodies())
def test_request_body_contract(server, payload):
    ctype, body = payload

    def post():
        headers = {"Content-Type": ctype} if ctype else {}
        status, _, data = request(server.url, "POST", "/v1/videos", body, headers, timeout=10)
        _judge(status, data)
        job = wait_done(server.url, json.loads(data)["id"], timeout=10)
        if job["status"] != "completed":  # accepted, then failed: the checks let through what cannot run
            raise _ServerError(f"accepted, then {job['status']}: {job.get('error')}")

    check_contract(OUTCOMES["serve body"], post, label=f"{ctype!r:.60} {body[:250]!r}")
