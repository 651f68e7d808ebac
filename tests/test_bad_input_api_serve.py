"""Bad input through the Python API, ``vidax serve``, batch files,
LoRA metadata, 8-bit tags and sizes past a denoiser's position embedding; each is one ``error:`` line (exit 2), one
:class:`vidax.UserError` raised before anything runs, or a 4xx.

The command-line cases follow tests/test_bad_input_files.py's contract (one line on stderr, no "internal error", no
output folder; where the case says so, before any weight loads: the weights are replaced by garbage first).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest

from serve_stub import StubPipe, form, load_pipe, post_json, request
from test_bad_input_files import _poison_weights, run_cli
from vidax_core import cli
from vidax_core.errors import UserError
from vidax_core.io.safetensors import SafetensorsFile, save_file
from vidax_core.serve import Limits, Server
from vidax_core.testing.assets import writable_asset
from vidax_core.testing.lora import save_adapter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "configs", "demo.yaml")
MODEL = "model.id=wan2.1-t2v-1.3b"
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]
CK = lambda c: f"model.checkpoint={c}"  # noqa: E731
Q = "blocks.0.attn1.to_q"


@pytest.fixture()
def ckpt(tmp_path):
    """A writable copy of the built-in tiny Wan checkpoint (diffusers layout)."""
    return writable_asset("vidax_wan", tmp_path / "ckpt")


def _alarm(seconds: float):
    """A test that would block (a FIFO read without end) fails instead of hanging the suite."""

    def fire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _fifo(t):
    path = t / "prompts.fifo"
    os.mkfifo(path)
    return str(path)


def _config_edit(c, component, **changes):
    path = os.path.join(c, component, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg.update(changes)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return c


def _family(t, family):
    return writable_asset(f"vidax_{family}", t / family)


# ---- adapters and 8-bit tags -----------------------------------------------------------------------------------

def _lora(t, metadata=None, value=0.1, name="a.safetensors"):
    rng = np.random.default_rng(0)
    tensors = {f"transformer.{Q}.lora_A.weight": rng.normal(0, value, (4, 24)).astype(np.float32),
               f"transformer.{Q}.lora_B.weight": rng.normal(0, value, (24, 4)).astype(np.float32)}
    if value > 1:  # every entry large: the fused weight overflows float32 though scale and alpha are finite
        tensors = {k: np.full(v.shape, value, np.float32) for k, v in tensors.items()}
    return save_adapter(t / name, tensors, None if metadata is None else {"r": 4, **metadata})


def _lora_entry(path, scale=None):
    return "lora=[{path: " + str(path) + ("" if scale is None else f", scale: {scale}") + "}]"


def _rewrite(c, edit):
    """The tiny transformer file rewritten by ``edit(tensors) -> metadata``."""
    path = os.path.join(c, "transformer", "diffusion_pytorch_model.safetensors")
    f = SafetensorsFile(path)
    tensors = {k: np.array(f[k]) for k in f}
    del f
    meta = edit(tensors) or None
    save_file(tensors, path, metadata=meta)
    return c


def _tag(conf_text: str):
    def edit(t):
        w = t[Q + ".weight"]
        s = (np.abs(w).max(axis=1, keepdims=True) / 127).astype(np.float32)
        t[Q + ".weight"] = np.round(w / s).astype(np.int8)
        t[Q + ".weight_scale"] = s
        t[Q + ".comfy_quant"] = np.frombuffer(conf_text.encode(), np.uint8).copy()
    return edit


def _metadata(text: str):
    def edit(t):
        _tag('{"format": "int8_tensorwise"}')(t)
        del t[Q + ".comfy_quant"]
        return {"_quantization_metadata": text}
    return edit


DEEP = "[" * 100_000 + "]" * 100_000


def _npz_empty(t):
    np.savez(t / "n.npz")
    return str(t / "n.npz")


# (case id, setup(tmp, ckpt) -> args, expected fragment(s) ("!words": absent), refused before the weights load)
CASES = [
    # 1: a FIFO as --prompts (blocked for ever before)
    ("prompts-fifo", lambda t, c: [DEMO, "--prompts", _fifo(t), "--dry-run"], "is not a regular file", True),
    # 2: sizes past the denoiser's RoPE table / learned table / patch: refused before loading, with the key to change
    ("size-past-wan-rope", lambda t, c: [MODEL, CK(c), *SMALL, "sampling.height=2048"],
     ("more than the 32 of rope_max_seq_len=32 in transformer/config.json", "use sampling.height=512 or less"), True),
    ("size-past-wan-rope-dry-run", lambda t, c: [MODEL, CK(c), *SMALL, "sampling.num_frames=1025", "--dry-run"],
     "use sampling.num_frames=125 or less", True),
    ("frames-past-cosmos-table", lambda t, c: [os.path.join(ROOT, "configs", "cosmos_demo.yaml"),
                                               CK(_family(t, "cosmos")), "sampling.num_frames=1025", "--dry-run"],
     "more than the 128 of max_size=[128, 240, 240] / patch_size=[1, 2, 2]", True),
    ("cogvideox15-rope-grid", lambda t, c: ["model.id=cogvideox1.5-5b", "sampling.num_frames=17",
                                            CK(_config_edit(_family(t, "cogvideox"), "transformer", patch_size_t=2)),
                                            *SMALL[:2], "sampling.num_steps=2", "--dry-run"],
     ("more than the 3 of sample_height=6", "(the RoPE grid): use sampling.height=48 or less"), True),
    ("wan-patch-does-not-divide", lambda t, c: [MODEL, CK(_config_edit(c, "transformer", patch_size=[1, 4, 4])),
                                                *SMALL, "sampling.height=48", "--dry-run"],
     "makes a latent height of 6, which the denoiser's patch of 4", True),
    # 3: LoRA peft metadata (an adapter is checked against the checkpoint's tensor names: its weights stay whole)
    *[(f"lora-meta-{name}", lambda t, c, m=meta: [MODEL, CK(c), *SMALL, _lora_entry(_lora(t, m))], words, False)
      for name, meta, words in [
          ("alpha-text", {"lora_alpha": "x"}, "lora_alpha must be a number, got 'x'"),
          ("alpha-list", {"lora_alpha": [1]}, "lora_alpha must be a number, got [1]"),
          ("pattern-regex", {"alpha_pattern": {"(": 3}}, "alpha_pattern['('] is not a regular expression"),
          ("pattern-text", {"alpha_pattern": {"to_q": "x"}}, "alpha_pattern['to_q'] must be a number"),
          ("pattern-list", {"alpha_pattern": [1]}, "alpha_pattern must map module patterns to alphas"),
          ("alpha-nan", {"lora_alpha": float("nan")}, "lora_alpha must be a finite number, got nan"),
      ]],
    ("lora-meta-dry-run", lambda t, c: [MODEL, CK(c), *SMALL, _lora_entry(_lora(t, {"lora_alpha": "x"})), "--dry-run"],
     "lora_alpha must be a number", False),
    ("lora-alpha-1e308", lambda t, c: [MODEL, CK(c), *SMALL, _lora_entry(_lora(t, {"lora_alpha": 1e308}))],
     "beyond float32", False),
    ("lora-scale-1e300", lambda t, c: [MODEL, CK(c), *SMALL, _lora_entry(_lora(t), "1.0e+300")],
     "lora[0].scale 1e+300 is beyond float32", False),
    ("lora-scale-1e300-alpha-0", lambda t, c: [MODEL, CK(c), *SMALL,
                                               _lora_entry(_lora(t, {"lora_alpha": 0}), "1.0e+300"),
                                               "--dry-run"], "lora[0].scale 1e+300 is beyond float32", False),
    ("lora-fused-overflow", lambda t, c: [MODEL, CK(c), *SMALL, _lora_entry(_lora(t, {"lora_alpha": 4e37}, 1e3))],
     "give values beyond float32", False),
    # 4: 8-bit tags
    ("comfy-tag-params-list", lambda t, c: [MODEL,
                                            CK(_rewrite(c, _tag('{"format": "int8_tensorwise", "params": [1]}'))),
                                            *SMALL], "params must be a mapping, got list", False),
    ("comfy-tag-deep", lambda t, c: [MODEL, CK(_rewrite(c, _tag(DEEP))), *SMALL], "is not a JSON quantization tag",
     False),
    ("comfy-metadata-params-text", lambda t, c: [MODEL, CK(_rewrite(c, _metadata(json.dumps(
        {"layers": {Q: {"format": "int8_tensorwise", "params": "x"}}})))), *SMALL],
     "params must be a mapping, got str", False),
    ("comfy-metadata-deep", lambda t, c: [MODEL, CK(_rewrite(c, _metadata(DEEP))), *SMALL],
     "_quantization_metadata entry is not JSON", False),
    # also: an empty .npz names what the model takes; list options are described as lists
    ("noise-npz-empty", lambda t, c: [MODEL, CK(c), *SMALL, f"sampling.initial_noise={_npz_empty(t)}"],
     ("this model's latents are one array of shape (1, 4, 2, 8, 8)", "!no .npy magic"), True),
    ("option-list-as-scalar", lambda t, c: [os.path.join(ROOT, "configs", "ltx2_demo.yaml"), "options.sigmas=5",
                                            "--dry-run"], "must be a list of numbers or null, got 5", True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_cli_input_is_one_line(case, tmp_path, ckpt, capfd, monkeypatch):
    name, setup, fragment, early = case
    monkeypatch.chdir(tmp_path)
    args = setup(tmp_path, ckpt)
    if early:
        _poison_weights(tmp_path)
    _alarm(60)
    try:
        code, lines = run_cli(args, tmp_path, capfd)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "internal error" not in lines[0], lines[0]
    for part in (fragment if isinstance(fragment, tuple) else (fragment,)):  # "!words": must not be there
        assert (part[1:] not in lines[0]) if part.startswith("!") else (part in lines[0]), lines[0]
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("meta", [{"lora_alpha": "x"}, {"alpha_pattern": {"(": 3}}, {"alpha_pattern": [1]}])
def test_lora_inspect_refuses_bad_metadata(tmp_path, capfd, meta):
    code = cli.main(["lora", "inspect", _lora(tmp_path, meta), "wan2.1-t2v-1.3b"])
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "internal" not in lines[0], lines


def test_prompts_from_dev_zero_is_refused_without_reading_it(tmp_path):
    """/dev/zero reports size 0: the old cap read it until memory ran out. Run with a 3 GiB address-space limit so
    a regression fails instead of taking the machine's memory."""
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
            "from vidax_core.runner.batch import read_prompts_file\n"
            "from vidax_core.errors import UserError\n"
            "try:\n    read_prompts_file('/dev/zero')\nexcept UserError as e:\n    print('error:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stdout.startswith("error: --prompts /dev/zero is not a regular file"), (proc.stdout, proc.stderr[-500:])


# ---- the Python API ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipe():
    p = load_pipe()
    yield p
    p.close()


@pytest.fixture()
def nothing_runs(pipe, monkeypatch):
    """A call that got past its checks would encode its prompt and sample: either fails the test."""
    from vidax_core.runner import loaded

    def tripwire(*a, **k):
        raise AssertionError("the call ran")

    monkeypatch.setattr(pipe._model, "_encode_call", tripwire)
    monkeypatch.setattr(loaded, "sample_pass", tripwire)
    return pipe


@pytest.mark.parametrize("override", [None, 5, b"x"])
def test_load_overrides_must_be_strings(override):
    import vidax

    with pytest.raises(UserError, match="overrides as 'key=value' strings"):
        vidax.load(DEMO, override)


@pytest.mark.parametrize("kwargs, words", [
    (dict(cache={"method": {5}}), "cache.method must be text, a number"),
    (dict(cancel=5), "cancel must be a threading.Event or a function"),
    (dict(on_progress=object()), "on_progress must be a function"),
    (dict(num_frames=1025), "rope_max_seq_len=32"),
    (dict(height=2048), "use sampling.height=512 or less"),
    (dict(dtype="float32"), "load again with model.dtype=…"),
    (dict(tp=2), "load again with parallel.tp=…"),
    (dict(options={"x": object()}), "options.x must be text"),
    (dict(options={"a\nb": {1, 2}}), "options['a\\nb'] must be text"),
])
def test_call_refused_before_it_runs(nothing_runs, kwargs, words):
    with pytest.raises(UserError) as info:
        nothing_runs(prompt="a fox", **kwargs)
    assert words in str(info.value) and len(str(info.value).splitlines()) == 1, str(info.value)


# ---- vidax serve ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(pipe, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve3")
    with Server(pipe, port=0, output_dir=str(root / "out"), quiet=True, limits=Limits(max_steps=50)) as srv:
        yield srv


@pytest.mark.parametrize("line", [b"GET / HTTP/9.9", b"GET /health"])  # HTTP/9.9; HTTP/0.9 (no status line)
def test_http_version_is_a_client_error(server, line):
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(line + b"\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):  # the server closes the connection after its answer
            reply += chunk
    assert reply.split(b"\r\n", 1)[0].split(b" ")[1] == b"400", reply[:200]
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["type"] == "invalid_request_error" and "HTTP/1.1" in body["error"]["message"], body


def test_size_past_the_rope_table_is_a_400(server):
    status, body = post_json(server.url, {"prompt": "a fox", "size": "1920x1088"})
    assert status == 400, body
    assert "rope_max_seq_len" in body["error"]["message"], body


def _png_claiming(width, height):
    """A PNG whose header claims ``width`` x ``height`` (a decompression bomb's size) with a one-byte image."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


def test_upload_refusals_hide_the_server_path_and_name_the_formats(tmp_path):
    from PIL import Image

    stub = StubPipe(DEMO, "model.id=wan2.2-ti2v-5b")
    out = tmp_path / "served"
    with Server(stub, port=0, output_dir=str(out), quiet=True) as srv:
        body, ctype = form({"prompt": "a"}, {"input_reference": ("big.png", _png_claiming(10000, 10000), "image/png")})
        status, _, data = request(srv.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
        message = json.loads(data)["error"]["message"]
        assert status == 400 and "input_reference" in message, message
        assert str(out) not in message and str(tmp_path) not in message, message
        tiff = tmp_path / "a.tiff"
        Image.new("RGB", (8, 8)).save(tiff)
        body, ctype = form({"prompt": "a"}, {"input_reference": ("a.tiff", tiff.read_bytes(), "image/tiff")})
        status, _, data = request(srv.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
        message = json.loads(data)["error"]["message"]
        assert status == 400 and "PNG, JPEG, WebP, BMP or GIF" in message, message
    with open(os.path.join(ROOT, "docs", "serving.md")) as f:
        assert "PNG, JPEG, WebP, BMP or GIF" in f.read()  # the docs list what the refusal names


# ---- clean but confusing ----------------------------------------------------------------------------------------

def _vidax(*args, env=None, cwd=None, timeout=300):
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "vidax"), *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def test_error_line_starts_its_own_line_after_the_bars(tmp_path):
    """A load that fails with its progress bar open: the bar is closed first, the error: line comes last."""
    adapter = _lora(tmp_path, {"lora_alpha": 4e37}, 1e3)
    proc = _vidax("run", DEMO, *SMALL, _lora_entry(adapter), f"output.path={tmp_path / 'o.mp4'}",
                  "output.metrics=null", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr.rstrip("\n")
    last = err.rsplit("\n", 1)[-1]
    assert last.startswith("error: ") and "beyond float32" in last, err[-1000:]
    assert err.count("error: ") == 1 and "\r" not in last, err[-1000:]


@pytest.mark.parametrize("name, text", [
    ("jobs.JSONL", '{"prompt": "a fox", "seed": 3}\n{"prompt": "a cat"}\n'),
    ("jobs.json", '[{"prompt": "a fox", "seed": 3}, "a cat"]'),
    ("jobs.txt", '{"prompt": "a fox", "seed": 3}\n{"prompt": "a cat"}\n'),
])
def test_prompts_files_holding_json_are_read_as_json(tmp_path, capfd, name, text):
    path = tmp_path / name
    path.write_text(text)
    code = cli.main(["run", DEMO, *SMALL, "--prompts", str(path), "--dry-run", f"output.path={tmp_path / 'v.mp4'}"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "batch:      2 videos" in out and "'a fox' -> " in out and "'a cat' -> " in out, out
    assert "v_0001.mp4" in out and "v_0002.mp4" in out, out


def test_show_config_of_a_model_without_a_frame_default(capfd):
    code = cli.main(["show-config", "ltx-2.5-22b-dev"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "  num_frames: null" in out and "# sampling.num_frames has no default" in out, out


def test_lora_hub_id_without_network_fails_fast(tmp_path):
    """The hub's host refuses the connection (HF_ENDPOINT on a closed local port): one line within seconds (the hub
    client's retries took 23-24 s), the message whole."""
    code = ("from vidax_core.lora.files import locate\nfrom vidax_core.errors import UserError\n"
            "try:\n    locate('someone/some-lora', None, 'lora[0]')\nexcept UserError as e:\n    print('error:', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert time.monotonic() - t0 < 15, proc.stdout
    assert proc.stdout.startswith("error: lora[0]: hub repo someone/some-lora is not in the local Hugging Face "
                              "cache and http://127.0.0.1:9 cannot be reached"), proc.stdout + proc.stderr[-500:]
    assert proc.stdout.rstrip().endswith("give its local path"), proc.stdout


def test_clipped_messages_end_on_a_word():
    from vidax_core.lora.files import clip

    text = "Please check your connection and try again or make sure your Internet connection is on. " * 4
    out = clip(text, 160)
    assert len(out) <= 164 and out.endswith(" ...") and text.startswith(out[:-4]) and text[len(out) - 4] == " "


def test_numpy_scalars_are_numbers(pipe):
    """A call argument is what a config holds: a numpy integer or float is its number, a set is refused."""
    cfg = pipe.resolve(prompt="a fox", seed=np.int64(3), guidance_scale=np.float32(2.5), num_frames=np.int32(5))
    assert (cfg.sampling.seed, cfg.sampling.guidance_scale, cfg.sampling.num_frames) == (3, 2.5, 5)
    with pytest.raises(UserError, match="options.k must be text, a number"):
        pipe.resolve(prompt="a fox", options={"k": {1}})
