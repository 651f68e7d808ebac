"""``vidax serve``'s HTTP API: bad requests get a 4xx with the CLI's words, never a 5xx; ids cannot reach files
outside the output folder; the OpenAI Python SDK works against it; uploads land in the output folder only."""

from __future__ import annotations

import json
import os
import re
import socket

import pytest

from serve_stub import StubPipe, TINY, form, load_pipe, png, post_json, request, wait_done
from vidax_core.errors import UserError
from vidax_core.serve import Limits, Server

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")

ID_FILE = re.compile(r"^video_[0-9a-f]{32}(\.mp4|\.input\.(png|jpg|webp|bmp|gif))$")


@pytest.fixture(scope="module")
def pipe():
    p = load_pipe()
    yield p
    p.close()


@pytest.fixture(scope="module")
def server(pipe, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    with Server(pipe, port=0, output_dir=str(root / "out"), quiet=True,
                limits=Limits(max_steps=5000, max_body_bytes=2_000_000)) as srv:
        srv.root = root
        yield srv


def cli_words(pipe, **kw) -> str:
    """What ``pipe.resolve`` (the CLI's checks) says about a call."""
    with pytest.raises(UserError) as info:
        pipe.resolve(prompt="p", **kw)
    return " ".join(str(info.value).split())


JSON = {"Content-Type": "application/json"}
BAD = [
    # (what, method, path, body, headers, status, words in the message)
    ("malformed JSON", "POST", "/v1/videos", b'{"prompt": ', JSON, 400, "malformed JSON body"),
    ("JSON not an object", "POST", "/v1/videos", b'["a"]', JSON, 400, "must be an object"),
    ("not UTF-8", "POST", "/v1/videos", b'{"prompt": "\xff"}', JSON, 400, "not UTF-8"),
    ("unknown field", "POST", "/v1/videos", b'{"prompt": "a", "promt": "b"}', JSON, 400, "did you mean 'prompt'"),
    ("steps as text", "POST", "/v1/videos", b'{"prompt": "a", "num_steps": "many"}', JSON, 400,
     "num_steps must be an integer"),
    ("steps as float", "POST", "/v1/videos", b'{"prompt": "a", "num_steps": 2.5}', JSON, 400,
     "num_steps must be an integer"),
    ("seed as bool", "POST", "/v1/videos", b'{"prompt": "a", "seed": true}', JSON, 400, "seed must be an integer"),
    ("negative seed", "POST", "/v1/videos", b'{"prompt": "a", "seed": -1}', JSON, 400, "seed must be between"),
    ("NaN guidance", "POST", "/v1/videos", b'{"prompt": "a", "guidance_scale": NaN}', JSON, 400,
     "NaN is not a JSON number"),
    ("prompt a number", "POST", "/v1/videos", b'{"prompt": 5}', JSON, 400, "prompt must be a string"),
    ("no prompt", "POST", "/v1/videos", b'{"seed": 1}', JSON, 400, "prompt is required"),
    ("size not WxH", "POST", "/v1/videos", b'{"prompt": "a", "size": "big"}', JSON, 400, "size must be WIDTHxHEIGHT"),
    ("size and width disagree", "POST", "/v1/videos", b'{"prompt": "a", "size": "32x32", "width": 48}', JSON, 400,
     "disagree"),
    ("negative seconds", "POST", "/v1/videos", b'{"prompt": "a", "seconds": "-1"}', JSON, 400,
     "seconds must be more than 0"),
    ("seconds and frames", "POST", "/v1/videos", b'{"prompt": "a", "seconds": 1, "num_frames": 5}', JSON, 400,
     "not both"),
    ("another model", "POST", "/v1/videos", b'{"prompt": "a", "model": "sora-2"}', JSON, 400,
     "this server serves model"),
    ("1 MB prompt", "POST", "/v1/videos", json.dumps({"prompt": "x" * 1_000_000}).encode(), JSON, 400,
     "more than this server's limit"),
    ("steps over the limit", "POST", "/v1/videos", b'{"prompt": "a", "num_steps": 5001}', JSON, 400,
     "more than this server's limit of 5000"),
    ("body over the limit", "POST", "/v1/videos", b"{}", {"Content-Type": "application/json",
                                                          "Content-Length": "3000000"}, 413, "more than"),
    ("urlencoded bad steps", "POST", "/v1/videos", b"prompt=a&num_steps=x",
     {"Content-Type": "application/x-www-form-urlencoded"}, 400, "num_steps must be an integer"),
    ("unsupported content type", "POST", "/v1/videos", b"prompt=a", {"Content-Type": "text/plain"}, 415,
     "is not accepted"),
    ("multipart without boundary", "POST", "/v1/videos", b"x", {"Content-Type": "multipart/form-data"}, 400,
     "boundary"),
    ("multipart cut short", "POST", "/v1/videos",
     b'--b\r\nContent-Disposition: form-data; name="prompt"\r\n\r\na\r\n',
     {"Content-Type": "multipart/form-data; boundary=b"}, 400, "closing boundary is missing"),
    ("id not an id", "GET", "/v1/videos/abc", None, {}, 400, "is not a video id"),
    ("id with a path", "GET", "/v1/videos/..%2F..%2Fetc%2Fpasswd/content", None, {}, 400, "is not a video id"),
    ("dot-dot path", "GET", "/v1/videos/../../etc/passwd", None, {}, 404, "no such endpoint"),
    ("unknown id", "GET", "/v1/videos/video_" + "0" * 32, None, {}, 404, "no video with id"),
    ("unknown id content", "GET", "/v1/videos/video_" + "0" * 32 + "/content", None, {}, 404, "no video with id"),
    ("delete unknown id", "DELETE", "/v1/videos/video_" + "0" * 32, None, {}, 404, "no video with id"),
    ("list limit 0", "GET", "/v1/videos?limit=0", None, {}, 400, "limit must be an integer from 1 to 100"),
    ("list order", "GET", "/v1/videos?order=sideways", None, {}, 400, "order must be asc or desc"),
    ("list after", "GET", "/v1/videos?after=../x", None, {}, 400, "is not a video id"),
    ("list after unknown", "GET", "/v1/videos?after=video_" + "0" * 32, None, {}, 400, "not the id of a listed"),
    ("list unknown param", "GET", "/v1/videos?page=2", None, {}, 400, "unknown query parameter"),
    ("wrong method", "PUT", "/v1/videos", b"", {}, 405, "use GET or POST"),
    ("odd method", "BREW", "/health", None, {}, 405, "is not allowed"),
    ("no endpoint", "GET", "/etc/passwd", None, {}, 404, "no such endpoint"),
    ("empty body", "POST", "/v1/videos", None, {}, 400, "malformed JSON body"),
    ("chunked body", "POST", "/v1/videos", b"", {"Transfer-Encoding": "chunked"}, 411, "Content-Length"),
]


@pytest.mark.parametrize("what,method,path,body,headers,status,words", BAD, ids=[b[0] for b in BAD])
def test_bad_request(server, what, method, path, body, headers, status, words):
    got, hdrs, data = request(server.url, method, path, body, headers)
    assert got == status, data[:300]
    assert hdrs["Content-Type"] == "application/json"
    assert words in json.loads(data)["error"]["message"]


@pytest.mark.parametrize("kw", [{"width": 33}, {"num_frames": 6}, {"height": 40}])
def test_model_refusals_carry_the_cli_words(server, pipe, kw):
    """Sizes and frame counts the model refuses: a 400 whose message is what the CLI prints for them."""
    status, body = post_json(server.url, {"prompt": "a", **kw})
    assert status == 400
    assert body["error"]["message"] == cli_words(pipe, **kw)


def test_multipart_as_httpx_encodes_it():
    """The parser reads what httpx (the OpenAI SDK's HTTP client) writes: text fields and a binary file whose
    bytes contain CRLFs and dashes."""
    import httpx2 as httpx

    from vidax_core.serve import multipart

    blob = bytes(range(256)) * 4 + b"\r\n--\r\n\r\n"
    req = httpx.Request("POST", "http://x/", data={"prompt": "a fox\r\nline two", "seed": "7"},
                        files={"input_reference": ("ref.png", blob, "image/png")})
    parts = {p.name: p for p in multipart.parse(req.read(), req.headers["Content-Type"])}
    assert parts["prompt"].text() == "a fox\r\nline two" and parts["seed"].text() == "7"
    ref = parts["input_reference"]
    assert ref.data == blob and ref.filename == "ref.png" and ref.content_type == "image/png"


def test_bad_request_line_is_4xx(server):
    u = server.url.rsplit(":", 1)
    with socket.create_connection(("127.0.0.1", int(u[1])), timeout=10) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400") or reply.startswith(b"HTTP/1.0 400"), reply[:100]


def test_bad_form_fields(server):
    cases = [
        ({"prompt": "a", "num_steps": "2.5"}, None, "num_steps must be an integer"),
        ({"prompt": "a", "seconds": "soon"}, None, "seconds must be a number"),
        ({"prompt": "a"}, {"input_reference": ("x.png", b"not an image", "image/png")}, "not a readable image"),
        ({"prompt": "a"}, {"prompt": ("p.txt", b"a", "text/plain")}, "given twice"),
        ({"prompt": "a", "input_reference[image_url]": "http://x/y.png"}, None, "must be an image file upload"),
    ]
    for fields, files, words in cases:
        body, ctype = form(fields, files)
        status, _, data = request(server.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
        assert status == 400, (fields, data)
        assert words in json.loads(data)["error"]["message"]


def test_refused_upload_leaves_no_file(server, pipe):
    """input_reference on a text-to-video model: refused with the CLI's words, and the upload is not kept."""
    body, ctype = form({"prompt": "a"}, {"input_reference": ("../../evil.png", png(), "image/png")})
    status, _, data = request(server.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
    assert status == 400
    assert "takes no image" in json.loads(data)["error"]["message"]
    out = server.root / "out"
    assert not any(".input." in name for name in os.listdir(out))
    assert sorted(os.listdir(server.root)) == ["out"]


def test_a_job_runs_and_lists(server):
    status, obj = post_json(server.url, {"prompt": "a fox", "seconds": "0.5", "size": "32x32", "seed": 3})
    assert status == 200, obj
    assert obj["object"] == "video" and obj["status"] in ("queued", "in_progress") and obj["size"] == "32x32"
    done = wait_done(server.url, obj["id"])
    assert done["status"] == "completed" and done["progress"] == 100, done
    assert done["completed_at"] >= done["created_at"]
    status, hdrs, data = request(server.url, "GET", f"/v1/videos/{obj['id']}/content")
    assert status == 200 and hdrs["Content-Type"] == "video/mp4" and data[4:8] == b"ftyp"
    status, hdrs, part = request(server.url, "GET", f"/v1/videos/{obj['id']}/content", headers={"Range": "bytes=4-7"})
    assert status == 206 and part == b"ftyp" and hdrs["Content-Range"] == f"bytes 4-7/{len(data)}"
    status, _, body = request(server.url, "GET", "/v1/videos?order=asc&limit=100")
    listed = json.loads(body)
    assert obj["id"] in [v["id"] for v in listed["data"]] and listed["has_more"] is False
    for name in os.listdir(server.root / "out"):
        assert ID_FILE.match(name), name


def test_cursor_list(server):
    ids = [post_json(server.url, {"prompt": f"p{i}", "num_steps": 1})[1]["id"] for i in range(3)]
    for i in ids:
        wait_done(server.url, i)
    seen, after = [], None
    while True:
        q = "/v1/videos?order=asc&limit=2" + (f"&after={after}" if after else "")
        page = json.loads(request(server.url, "GET", q)[2])
        seen += [v["id"] for v in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen[-3:] == ids
    desc = json.loads(request(server.url, "GET", "/v1/videos?limit=3")[2])
    assert [v["id"] for v in desc["data"]] == ids[::-1]


@pytest.mark.filterwarnings("ignore:The Sora API is scheduled:DeprecationWarning")
def test_openai_sdk(server):
    """The real OpenAI Python SDK: create (multipart, vidax fields through extra_body), retrieve, download, list,
    delete, and a refused request as the SDK's BadRequestError carrying the model's words."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    video = client.videos.create(prompt="a fox in snow", seconds="0.5", size="32x32", extra_body={"num_steps": 2})
    assert video.status in ("queued", "in_progress") and video.size == "32x32"
    done = wait_done(server.url, video.id)
    assert done["status"] == "completed", done
    got = client.videos.retrieve(video.id)
    assert got.status == "completed" and got.progress == 100
    content = client.videos.download_content(video.id).read()
    assert content[4:8] == b"ftyp"
    assert video.id in [v.id for v in client.videos.list(limit=100)]
    deleted = client.videos.delete(video.id)
    assert deleted.deleted and deleted.id == video.id
    assert not (server.root / "out" / f"{video.id}.mp4").exists()
    with pytest.raises(openai.BadRequestError) as info:
        client.videos.create(prompt="a", size="33x32")
    assert "multiple of 16" in str(info.value)


def test_a_failing_job_does_not_take_the_server_down(tmp_path):
    """A call that raises (a bug, or a UserError found only while running) fails its job with the words; the
    next job runs."""

    class Flaky(StubPipe):
        def __call__(self, **kw):
            if kw["prompt"] == "crash":
                raise RuntimeError("device fell over\nsecond line")
            if kw["prompt"] == "refuse":
                raise UserError("the prompt encoder refuses this\n  prompt")
            return super().__call__(**kw)

    with Server(Flaky(DEMO_CONFIG, *TINY), port=0, output_dir=str(tmp_path), quiet=True) as srv:
        ids = [post_json(srv.url, {"prompt": p})[1]["id"] for p in ("crash", "refuse", "fine")]
        crash, refuse, fine = (wait_done(srv.url, i) for i in ids)
    assert crash["status"] == "failed" and crash["error"] == {
        "code": "internal_error", "message": "internal error (RuntimeError: device fell over)"}
    assert refuse["status"] == "failed" and refuse["error"] == {
        "code": "invalid_request", "message": "the prompt encoder refuses this prompt"}
    assert fine["status"] == "completed"
    assert sorted(os.listdir(tmp_path)) == [f"{ids[2]}.mp4"]


def test_decoding_is_a_phase_of_its_own_and_each_job_logs_one_line(tmp_path, capfd):
    """The steps fill the job's progress up to 90%, the decode has its own phase and percentage (the progress
    moves on from 90 to 99), the write ends at 100; the server's log holds one line per finished job."""
    import time

    with Server(StubPipe(DEMO_CONFIG, *TINY, step_s=0.15), port=0, output_dir=str(tmp_path), quiet=False) as srv:
        capfd.readouterr()
        job = post_json(srv.url, {"prompt": "a fox"})[1]
        seen, end = [], time.monotonic() + 120
        while not seen or seen[-1]["status"] not in ("completed", "failed"):
            assert time.monotonic() < end, f"job {job['id']} did not finish in 120 s: {seen[-1]}"
            seen.append(json.loads(request(srv.url, "GET", f"/v1/videos/{job['id']}")[2]))
            time.sleep(0.03)
        bad = post_json(srv.url, {"prompt": "a fox", "num_steps": 0})
    phases = [o["phase"] for o in seen]
    assert "sampling" in phases and "decoding" in phases, phases
    assert phases.index("sampling") < phases.index("decoding")
    assert all(o["progress"] < 90 for o in seen if o["phase"] == "sampling"), seen
    assert all(90 <= o["progress"] <= 99 and 0 < o["decode_progress"] <= 100 for o in seen
               if o["phase"] == "decoding"), seen
    assert seen[-1]["progress"] == 100 and seen[-1]["phase"] == "done"
    assert bad[0] == 400  # refused when posted: no job, no log line
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("job ")]
    assert len(lines) == 1 and lines[0].startswith(f"job {job['id']} completed in "), lines
    assert "32x32" in lines[0] and "steps" in lines[0]
