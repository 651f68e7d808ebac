"""Bad files and values through `vidax run` (noise files, checkpoint configs and weights of every family, media,
tiling and scheduler values): each is one clean `error:` line (exit 2).

Same contract as tests/test_bad_input.py's table of run reproducers: exactly one line on stderr (fd 2), no traceback, no
"internal error", no partial output, no output folder; and, where the case says so, before any weight loads
(the checkpoint's weights are replaced by garbage, so a run that reached them would fail differently).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import zipfile

import numpy as np
import pytest

from vidax_core import cli
from vidax_core.testing.assets import writable_asset

MODEL = "model.id=wan2.1-t2v-1.3b"
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]
NOISE_SHAPE = (1, 4, 2, 8, 8)  # the Wan tiny run's latents= shape for SMALL
CK = lambda c: f"model.checkpoint={c}"  # noqa: E731
NOISE = lambda t, name: f"sampling.initial_noise={t / name}"  # noqa: E731


@pytest.fixture()
def ckpt(tmp_path):
    """A writable copy of the built-in tiny Wan checkpoint (diffusers layout)."""
    return writable_asset("vidax_wan", tmp_path / "ckpt")


def _bytes(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _npy_with_header(path, header: str, data: bytes = b"", version: int = 1):
    """A .npy whose header text is ``header`` (padded as numpy pads it), followed by ``data``."""
    body = header.encode("latin1")
    pad = 64 - (10 + len(body) + 1) % 64
    body = body + b" " * pad + b"\n"
    _bytes(path, b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H", len(body)) + body + data)


def _npy_bytes(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _cut(path, keep):
    _bytes(path, _npy_bytes(np.zeros(NOISE_SHAPE, np.float32))[:keep])


def _flip(path, at):
    raw = bytearray(_npy_bytes(np.zeros(NOISE_SHAPE, np.float32)))
    raw[at] ^= 0xFF
    _bytes(path, bytes(raw))


def _npz(path, **arrays):
    np.savez(path, **arrays)


def _npz_truncated(path):
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros((4, 4), np.float32))
    _bytes(path, buf.getvalue()[:100])


def _npz_bomb_member(path, name, shape):
    """A .npz whose member ``name`` is a header claiming ``shape`` float32 zeros, deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(_npy_bytes(np.zeros((0,), np.float32))[:0])
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": shape})
            f.write(head.getvalue())
            chunk = bytes(1 << 20)
            for _ in range(int(np.prod(shape)) * 4 // len(chunk)):
                f.write(chunk)


def run_cli(argv, tmp_path, capfd):
    if not any(a.startswith("runtime.compilation_cache_dir") for a in argv):
        argv = argv + [f"runtime.compilation_cache_dir={tmp_path / 'jc'}"]
    if not any(a.startswith("output.path") for a in argv):
        argv = argv + [f"output.path={tmp_path / 'new' / 'folder' / 'o.mp4'}"]
    code = cli.main(["run", *argv, "--quiet"])
    out, err = capfd.readouterr()
    return code, [line for line in err.splitlines() if line.strip()]


def _poison_weights(c):  # c: the folder holding every checkpoint of the case
    """Garbage in every denoiser and text-encoder weight file: a case that reaches them fails with a 'corrupt'
    message instead."""
    for root, _, files in os.walk(c):
        if not os.path.basename(root).startswith(("transformer", "text_encoder")):
            continue  # the denoiser and text encoders: the weights that cost minutes at full size
        for f in files:
            if f.endswith(".safetensors"):
                with open(os.path.join(root, f), "wb") as fh:
                    fh.write(b"x" * 64)


# (case id, setup(tmp, ckpt) -> args, expected fragment, refused before the weights load)
CASES = [
    # defect 1: zero item size / negative shape in a .npy header (SIGFPE in numpy's mmap before)
    *[(f"noise-zero-itemsize-{d.strip('<|')}",
       lambda t, c, d=d: [_npy_with_header(t / "n.npy",
                                           f"{{'descr': '{d}', 'fortran_order': False, 'shape': (-1,), }}"),
                          MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
       "must hold a real-valued numeric array", True) for d in ("<U0", "|V0", "|S0")],
    ("noise-negative-shape", lambda t, c: [_npy_with_header(t / "n.npy", "{'descr': '<f4', 'fortran_order': False, "
                                                                         "'shape': (-1,), }"),
                                           MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "not a tuple of non-negative integers", True),
    ("noise-header-promises-more",
     lambda t, c: [_npy_with_header(t / "n.npy",
                                    f"{{'descr': '<f4', 'fortran_order': False, 'shape': {NOISE_SHAPE}, }}",
                                    b"\0" * 16), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "its header promises 2048 data bytes, the file holds 16", True),
    # defect 3: cut / flipped headers, truncated and oversized .npz
    ("noise-header-cut", lambda t, c: [_cut(t / "n.npy", 40), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "truncated header", True),
    ("noise-header-flipped", lambda t, c: [_flip(t / "n.npy", 10), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "not a Python literal", True),
    ("noise-header-flipped-quote", lambda t, c: [_flip(t / "n.npy", 11), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "cannot be read as .npy", True),
    ("noise-data-cut", lambda t, c: [_cut(t / "n.npy", 200), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
     "truncated: its header promises", True),
    ("noise-npz-truncated", lambda t, c: [_npz_truncated(t / "n.npz"), MODEL, CK(c), NOISE(t, "n.npz")] + SMALL,
     "not a readable .npz archive", True),
    # confusing message: a .npz for a single-stream model
    ("noise-npz-for-one-stream", lambda t, c: [_npz(t / "n.npz", latents=np.zeros(NOISE_SHAPE, np.float32)), MODEL,
                                               CK(c), NOISE(t, "n.npz")] + SMALL,
     "save it alone with numpy.save", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_file_or_value_is_one_line(case, tmp_path, ckpt, capfd, monkeypatch):
    name, setup, fragment, early = case
    monkeypatch.chdir(tmp_path)
    args = [a for a in setup(tmp_path, ckpt) if isinstance(a, str)]
    if early:
        _poison_weights(tmp_path)
    code, lines = run_cli(args, tmp_path, capfd)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "internal error" not in lines[0], lines[0]
    fragment, absent = fragment if isinstance(fragment, tuple) else (fragment, None)
    assert fragment in lines[0], lines[0]
    assert absent is None or absent not in lines[0], lines[0]
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
    assert not (tmp_path / "new").exists()


# ---- the families' tiny checkpoints -------------------------------------------------------------------------

IDS = {"wan": "wan2.1-t2v-1.3b", "cosmos": "cosmos-predict2.5-2b", "cogvideox": "cogvideox-5b",
       "ltx": "ltx-video-2b-0.9.8-distilled", "hunyuan": "hunyuanvideo-t2v-13b"}


def _fam(t, family):
    """A writable copy of ``family``'s built-in tiny checkpoint under t/<family> (created once per test)."""
    import importlib

    dst = t / family
    if not dst.exists():
        mod = importlib.import_module(f"vidax_{family}")
        shutil.copytree(os.path.join(os.path.dirname(mod.__file__), "assets", "tiny-random"), dst)
    return dst


def _fam_json(t, family, rel, **changes):
    path = _fam(t, family) / rel
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _fam_json_del(t, family, rel, key):
    path = _fam(t, family) / rel
    data = json.loads(path.read_text())
    del data[key]
    path.write_text(json.dumps(data))


def _text(path, text: str | bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def FAM(family, *extra):  # noqa: N802 - reads as a case prefix
    return lambda t: [f"model.id={IDS[family]}", f"model.checkpoint={t / family}", *extra]


def _bomb_png(path):
    """A 57-byte PNG whose header says 100000 x 100000 pixels."""
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    _bytes(path, b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def _small_png(path, size=(32, 32)):
    from PIL import Image

    Image.new("RGB", size, (200, 30, 30)).save(path)


def _truncated_png(path):
    buf = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (64, 64), (10, 200, 30)).save(buf, format="PNG")
    _bytes(path, buf.getvalue()[:60])


CT = "tokenizer/chat_template.jinja"
LTX_SMALL = ["options.multiscale=false", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9",
             "sampling.num_steps=2"]

FAMILY_CASES = [
    # defect 2: a scheduler value that is NaN where it is meaningless is refused naming the key
    ("scheduler-nan-shift", lambda t, c: [_fam(t, "wan"),
                                          _fam_json(t, "wan", "scheduler/scheduler_config.json",
                                                    flow_shift=float("nan")), *FAM("wan")(t), *SMALL],
     "flow_shift must be a finite number", True),
    # defect 4: vae.tiling with an infinite size
    ("tiling-inf", lambda t, c: [MODEL, CK(c), "vae.tiling={tile_sample_min_height: .inf}"] + SMALL,
     "vae.tiling.tile_sample_min_height must be", True),
    # defect 5: offload.chunk_size with a non-string key
    ("chunk-size-int-key", lambda t, c: [MODEL, CK(c), "offload.enabled=true", "offload.chunk_size={1: 2}"] + SMALL,
     "offload.chunk_size", True),
    # defect 6: checkpoint config values of the wrong type
    ("cosmos-dim-mult-scalar", lambda t, c: [_fam_json(t, "cosmos", "vae/config.json", dim_mult=1e308),
                                             *FAM("cosmos", "sampling.num_steps=2")(t)],
     "key dim_mult must be a list", True),
    ("cogvideox-temporal-ratio-string", lambda t, c: [_fam_json(t, "cogvideox", "vae/config.json",
                                                                temporal_compression_ratio="x"),
                                                      *FAM("cogvideox", "sampling.num_steps=2")(t)],
     "key temporal_compression_ratio must be", True),
    ("cogvideox-temporal-ratio-string-dry-run", lambda t, c: [_fam_json(t, "cogvideox", "vae/config.json",
                                                                        temporal_compression_ratio="x"),
                                                              *FAM("cogvideox", "--dry-run")(t)],
     "key temporal_compression_ratio must be", True),
    ("hunyuan-spatial-ratio-list-dry-run", lambda t, c: [_fam_json(t, "hunyuan", "vae/config.json",
                                                                   spatial_compression_ratio=[8]),
                                                         *FAM("hunyuan", "--dry-run")(t)],
     "key spatial_compression_ratio must be", True),
    ("cosmos-head-dim-3", lambda t, c: [_fam_json(t, "cosmos", "transformer/config.json", attention_head_dim=3),
                                        *FAM("cosmos", "sampling.num_steps=2")(t)],
     "attention_head_dim", True),
    ("ltx-original-metadata-latent-channels", lambda t, c: [_ltx_original(t, latent_channels={}),
                                                            "model.id=ltx-video-2b-0.9.8-distilled",
                                                            f"model.checkpoint={t / 'ltx_original'}", *LTX_SMALL],
     "key latent_channels must be an integer", True),
    ("cosmos-vae-latents-mean-missing", lambda t, c: [_fam_json_del(t, "cosmos", "vae/config.json", "latents_mean"),
                                                      *FAM("cosmos", "sampling.num_steps=2")(t)],
     "latents_mean/latents_std need z_dim=4 entries", True),
    # defect 7: the Cosmos chat template, rendered in the pre-run check
    *[(f"cosmos-chat-template-{k}",
       lambda t, c, tpl=tpl: [_fam(t, "cosmos"), _text(t / "cosmos" / CT, tpl),
                              *FAM("cosmos", "sampling.num_steps=2")(t)],
       "chat_template.jinja", True)
      for k, tpl in [("undefined", "{{ nope.attr }}"), ("syntax", "{% for %}"),
                     ("raise", "{{ raise_exception('no') }}"), ("sandbox", "{{ ''.__class__.__mro__ }}"),
                     ("recursive", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"),
                     ("huge-range", "{% for i in range(10**9) %}x{% endfor %}"),
                     ("non-utf8", b"\xff\xfe{{ messages }}")]],
    # defect 8: HunyuanVideo prompt templates str.format cannot fill
    *[(f"hunyuan-template-{k}",
       lambda t, c, tpl=tpl: [*FAM("hunyuan", f"options.prompt_template={tpl}")(t), _fam(t, "hunyuan")],
       "options.prompt_template", True)
      for k, tpl in [("open-brace", "'{} {'"), ("named-field", "'{x} {}'"), ("index", "'{0} {}'"),
                     ("attr", "'{}{.a}'")]],
    # defect 9: crop_start bounded by the template's length
    ("hunyuan-crop-start-huge", lambda t, c: [_fam(t, "hunyuan"), *FAM("hunyuan", "options.crop_start=100000")(t)],
     "options.crop_start", True),
    # defect 10: every conditioning medium goes through the image/video preflight
    ("ltx-condition-bomb-png", lambda t, c: [_fam(t, "ltx"), _bomb_png(t / "b.png"),
                                             *FAM("ltx", f"options.conditions=[{{image: {t / 'b.png'}}}]",
                                                  *LTX_SMALL)(t)],
     "options.conditions[0]", True),
    ("ltx-condition-truncated-png", lambda t, c: [_fam(t, "ltx"), _truncated_png(t / "b.png"),
                                                  *FAM("ltx", f"options.conditions=[{{image: {t / 'b.png'}}}]",
                                                       *LTX_SMALL)(t)],
     "options.conditions[0]", True),
    ("ltx-condition-bad-video", lambda t, c: [_fam(t, "ltx"), _bytes(t / "v.mp4", b"\0" * 100),
                                              *FAM("ltx", f"options.conditions=[{{video: {t / 'v.mp4'}}}]",
                                                   *LTX_SMALL)(t)],
     "options.conditions[0]", True),
    ("image-bomb-png", lambda t, c: [_fam(t, "ltx"), _bomb_png(t / "b.png"),
                                     *FAM("ltx", f"image={t / 'b.png'}", *LTX_SMALL)(t)],
     "claims more pixels than PIL's limit", True),
    ("video-unreadable", lambda t, c: [_fam(t, "ltx"), _bytes(t / "v.mp4", b"\0" * 100),
                                       *FAM("ltx", f"video={t / 'v.mp4'}", *LTX_SMALL)(t)],
     "cannot be read as a video", True),
    # defect 11: the spatial upsampler is opened before sampling
    ("ltx-upsampler-garbage", lambda t, c: [_fam(t, "ltx"), _bytes(t / "up.safetensors", b"x" * 64),
                                            *FAM("ltx", f"options.spatial_upsampler={t / 'up.safetensors'}",
                                                 "sampling.num_steps=2")(t)],
     "up.safetensors", True),
    ("ltx-latent-upsampler-config", lambda t, c: [_fam(t, "ltx"),
                                                  _fam_json(t, "ltx", "latent_upsampler/config.json",
                                                            mid_channels="wide"),
                                                  *FAM("ltx", "sampling.num_steps=2")(t)],
     "mid_channels", True),
    # confusing messages
    ("relative-path-not-a-repo", lambda t, c: [_w_dir(t / "checkpoints"), MODEL,
                                               "model.checkpoint=checkpoints/CogVideoX-2b"] + SMALL,
     "no folder checkpoints/CogVideoX-2b", True),
    ("yaml-1e-300-frame-rate", lambda t, c: [_fam(t, "ltx"), *FAM("ltx", "options.frame_rate=1e-300", *LTX_SMALL)(t)],
     "options.frame_rate must be from 0.01", True),
    ("yaml-1e308-in-scheduler", lambda t, c: [MODEL, CK(c),
                                              "sampling.scheduler={name: unipc, flow_shift: 1e308}"] + SMALL,
     "these options give unipc non-finite", True),
    ("tiling-list-value", lambda t, c: [MODEL, CK(c), "vae.tiling={tile_sample_min_height: [1]}"] + SMALL,
     "vae.tiling.tile_sample_min_height must be an integer", True),
    ("tiling-enabled-string", lambda t, c: [MODEL, CK(c), "vae.tiling={enabled: 'no'}"] + SMALL,
     "vae.tiling.enabled must be true/false", True),
    ("relative-path-or-repo-offline", lambda t, c: [MODEL, "model.checkpoint=checkpoints/CogVideoX-2b"] + SMALL,
     "no local folder", True),
    ("null-spelled-as-yaml", lambda t, c: [MODEL, CK(c), "vae.tiling=null"] + SMALL, "got null", True),
    ("ltx-frames-hint", lambda t, c: [_fam(t, "ltx"),
                                      *FAM("ltx", "sampling.num_frames=4", "options.multiscale=false")(t)],
     "use 9", True),
    ("cosmos-pt-corrupt-pickle", lambda t, c: [_cosmos_pt(t), "model.id=cosmos-predict2.5-2b",
                                               f"model.checkpoint={t / 'cosmos_pt'}", "sampling.num_steps=2"],
     ("model_ema_bf16.pt has a corrupt", "transformer/config.json"), True),
    ("cogvideox-tiling-stride-key", lambda t, c: [_fam(t, "cogvideox"),
                                                  *FAM("cogvideox", "vae.tiling={tile_sample_stride_height: 100}")(t)],
     "vae.tiling.tile_sample_stride_height is not a tiling knob of this model's VAE", True),
    ("hunyuan-tiling-framewise-type", lambda t, c: [_fam(t, "hunyuan"),
                                                    *FAM("hunyuan", "vae.tiling={framewise: 'no'}")(t)],
     "vae.tiling.framewise must be true/false", True),
    ("cogvideox-frames-hint", lambda t, c: [_fam(t, "cogvideox"), *FAM("cogvideox", "sampling.num_frames=4")(t)],
     "use 9", True),
]


def _cosmos_pt(t):
    """An original-layout Cosmos folder (a DiT .pt beside vae/, text_encoder/, tokenizer/) whose pickle is cut."""
    root = t / "cosmos_pt"
    shutil.copytree(_fam(t, "cosmos"), root)
    shutil.rmtree(root / "transformer")
    (root / "model_index.json").unlink()
    with zipfile.ZipFile(root / "model_ema_bf16.pt", "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00(X\x03\x00\x00\x00net")
        z.writestr("archive/byteorder", "little")


def _ltx_original(t, **vae_changes):
    """An original-layout LTX folder: one release .safetensors whose metadata config holds the tiny model's
    transformer and VAE configs (``vae_changes`` applied), beside text_encoder/ and tokenizer/."""
    from safetensors.numpy import save_file

    src = _fam(t, "ltx")
    root = t / "ltx_original"
    root.mkdir()
    for comp in ("text_encoder", "tokenizer"):
        shutil.copytree(src / comp, root / comp)
    tcfg = json.loads((src / "transformer/config.json").read_text())
    vcfg = {**json.loads((src / "vae/config.json").read_text()), **vae_changes}
    meta = {"transformer": {k: tcfg[k] for k in ("num_attention_heads", "attention_head_dim", "num_layers",
                                                 "in_channels", "out_channels", "cross_attention_dim",
                                                 "caption_channels", "norm_eps")},
            "vae": vcfg}
    save_file({"vae.decoder.conv_in.conv.bias": np.zeros(2, np.float32)}, str(root / "ltxv-tiny.safetensors"),
              metadata={"config": json.dumps(meta)})


def _w_dir(path):
    path.mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("case", FAMILY_CASES, ids=[c[0] for c in FAMILY_CASES])
def test_bad_family_file_or_value_is_one_line(case, tmp_path, ckpt, capfd, monkeypatch):
    test_bad_file_or_value_is_one_line(case, tmp_path, ckpt, capfd, monkeypatch)
