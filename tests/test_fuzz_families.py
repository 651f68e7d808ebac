"""Property-based fuzzing of every family's inputs: checkpoint configs with wrong types, run options
(format strings included), conditioning media, Cosmos chat templates, LTX original-release metadata, and
initial-noise files (.npy / .npz headers, zero item sizes, truncation).

Each input is opened as a run would before its weights load (the config resolved, the pre-run checks, the
checkpoint resolved and checked against the model id, its sampler, denoiser and VAE configs built, the latent
grid), and, where a check accepts the input, used as the run would use it (the image decoded, the clip read, the
template rendered, the prompt template filled, the noise read). Every few inputs the whole dry run and the VAE
(tiny weights) are built too. The contract (tests/test_fuzz_contract.py): success or one :class:`UserError`
line, quickly. ``VIDAX_FUZZ_FAMILY_EXAMPLES`` is the number of inputs per family (split over its surfaces);
the module prints the outcome counts per surface and family.
"""

from __future__ import annotations

import copy
import importlib
import io
import json
import os
import shutil
import struct
import tempfile
import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings
from vidax_core import config
from vidax_core.plugins import get_plugins

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")

PER_FAMILY = int(os.environ.get("VIDAX_FUZZ_FAMILY_EXAMPLES", 6))
FAMILIES = {  # family -> (t2v model id, image model id, the demo config)
    "wan": ("wan2.1-t2v-1.3b", "wan2.1-i2v-14b-480p", DEMO_CONFIG),
    "cosmos": ("cosmos-predict2.5-2b", "cosmos-predict2.5-2b", "configs/cosmos_demo.yaml"),
    "cogvideox": ("cogvideox-5b", "cogvideox-5b-i2v", "configs/cogvideox_demo.yaml"),
    "ltx": ("ltx-video-2b-0.9.8-distilled", "ltx-video-2b-0.9.8-distilled", "configs/ltx_demo.yaml"),
    "hunyuan": ("hunyuanvideo-t2v-13b", "hunyuanvideo-i2v-13b", "configs/hunyuan_demo.yaml"),
}
# each family's share of its inputs per surface (the family-specific surface takes the rest)
SHARES = {"config": 0.25, "options": 0.3, "media": 0.25, "specific": 0.2}
SPECIFIC = {"cosmos": "template", "hunyuan": "format", "ltx": "original", "wan": "config", "cogvideox": "options"}
ROOT = os.path.join(os.path.dirname(__file__), "..")
TABLE: dict[tuple[str, str], Outcomes] = {}


def outcomes(surface: str, family: str) -> Outcomes:
    key = (surface, family)
    if key not in TABLE:
        TABLE[key] = Outcomes(f"{surface} {family}")
    return TABLE[key]


def examples(surface: str) -> dict:
    n = max(1, round(PER_FAMILY * SHARES[surface]))
    return {**fuzz_settings(default=n), "max_examples": n}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    import sys

    cols = ("ok", "user_error", "internal_error", "hang")
    lines = [f"\nfuzz families: {'surface':<10} {'family':<10} " + " ".join(f"{c:>14}" for c in cols)]
    per_family: dict[str, int] = {}
    for (surface, family), o in sorted(TABLE.items()):
        lines.append(f"fuzz families: {surface:<10} {family:<10} " + " ".join(f"{o.counts[c]:>14}" for c in cols))
        per_family[family] = per_family.get(family, 0) + sum(o.counts.values())
    lines.append("fuzz families: inputs per family: " + ", ".join(f"{k} {v}" for k, v in sorted(per_family.items())))
    print("\n".join(lines), file=sys.__stdout__)
    for (_surface, family), o in TABLE.items():
        o.save(family)
    for o in TABLE.values():
        for sig, v in o.signatures.items():
            print(f"  {o.surface}: VIOLATION at {sig}: {v[:300]}", file=sys.__stdout__)
    sys.__stdout__.flush()
    for o in TABLE.values():
        o.assert_clean()


def tiny(family: str) -> str:
    mod = importlib.import_module(f"vidax_{family}")
    return os.path.join(os.path.dirname(mod.__file__), "assets", "tiny-random")


def copy_folder(src: str, dst: str) -> None:
    """Small files copied (they are mutated), weights symlinked (read only)."""
    def copy(s, d):
        if s.endswith((".safetensors", ".pt", ".pth", ".bin")):
            os.symlink(os.path.abspath(s), d)
        else:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=copy)


# ---- junk ----------------------------------------------------------------------------------------------------

JUNK = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 7, 10**6, 2**31, 2**63, 10**400, 0.5, -2.5, 1e300, 1e308, 1e-300,
                     float("inf"), float("-inf"), float("nan"), "", "x", "32", "1e5", None, True, False, [], [1, 2],
                     [1, 2, 3, 4], {}, {"a": 1}, [0] * 3, [-1, 2, 2], [1e300], [float("inf")], "{}", "{", "{0}",
                     "rms_norm", "LTXVideo095DownBlock3D", "spatiotemporal", [True, False], [[1]], "\ud800"]),
    st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=5),
    st.lists(st.integers(-3, 300), max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(node, prefix=()):
    out = [prefix]
    if isinstance(node, dict):
        for k, v in list(node.items())[:64]:
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:6]):
            out += _paths(v, prefix + (i,))
    return out[:300]


def _set(node, path, value, delete=False):
    for p in path[:-1]:
        node = node[p]
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


def mutate_json_value(draw, data):
    """One value of ``data`` (a parsed JSON document) replaced by junk, or one key deleted; returns a label."""
    paths = [p for p in _paths(data) if p]
    if not paths:
        return "nothing"
    where = draw(st.sampled_from(paths))
    delete = draw(st.integers(0, 4)) == 0
    value = copy.deepcopy(draw(JUNK))  # the strategy's own list or dict must not end up in (and edited by) the file
    _set(data, where, value, delete=delete)
    return f"{'del' if delete else 'set'} {list(where)}={str(value)[:30]}"


def config_files(folder: str) -> list[str]:
    out = []
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith(".json") and f != "tokenizer.json":
                out.append(os.path.relpath(os.path.join(root, f), folder))
    return sorted(out)


@st.composite
def json_mutation(draw, folder):
    rel = draw(st.sampled_from(config_files(folder)))
    path = os.path.join(folder, rel)
    if os.path.islink(path) or not os.path.isfile(path):
        return f"{rel}: gone"
    kind = draw(st.sampled_from(["value"] * 8 + ["bytes", "truncate", "notobject", "remove"]))
    if kind == "value":
        try:
            data = json.loads(open(path, encoding="utf-8").read())
        except ValueError:  # an earlier mutation broke it: broken enough
            return f"{rel}: already broken"
        kind = mutate_json_value(draw, data)
        open(path, "wb").write(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    elif kind == "bytes":
        open(path, "wb").write(draw(st.binary(max_size=30)))
    elif kind == "truncate":
        raw = open(path, "rb").read()
        open(path, "wb").write(raw[: draw(st.integers(0, max(len(raw) - 1, 0)))])
    elif kind == "notobject":
        open(path, "w").write(json.dumps(draw(st.sampled_from([None, 5, "x", [1], True]))))
    else:
        os.unlink(path)
    return f"{rel}: {kind}"


# ---- what a run does before its weights load -----------------------------------------------------------------

def vae_config(family: str, cfg: dict):
    if family in ("wan", "cosmos"):
        from vidax_core.vae.wan21 import WanVAEConfig

        return WanVAEConfig.from_config(cfg)
    if family == "cogvideox":
        from vidax_cogvideox.vae import CogVideoXVAEConfig

        return CogVideoXVAEConfig.from_config(cfg)
    if family == "ltx":
        from vidax_ltx.vae import LTXVAEConfig

        return LTXVAEConfig.from_config(cfg)
    from vidax_core.vae.hunyuan import HunyuanVAEConfig

    return HunyuanVAEConfig.from_config(cfg)


def open_before_weights(family: str, overrides: list[str], full: bool) -> None:
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.runner import plan as planning
    from vidax_core.runner.denoiser import build_dit
    from vidax_core.runner.preflight import preflight

    plugins = get_plugins()
    cfg = config.resolve(os.path.join(ROOT, FAMILIES[family][2]), overrides, plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    if full:
        from vidax_core.report.dry_run import describe_plan

        describe_plan(cfg, plugins)
    preflight(cfg, spec, plugins, check_outputs=False)
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    passes = planning.sampling_passes(spec, ckpt, cfg, plugins)
    for p in passes:
        sampler = planning.select_sampler(spec, ckpt, p.run, plugins)
        planning.select_guidance(spec, ckpt, p.run, plugins)
        grid = plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=p.run)
        if grid is not None:
            planning.sampling_plan(spec, ckpt, p.run, plugins, sampler, tuple(int(v) for v in grid))
    build_dit(spec, ckpt, cfg, plugins)
    if ckpt.has("vae"):
        vae_config(family, ckpt.config("vae"))
    if full:
        vae = plugins.call("build_vae", spec, ckpt=ckpt, run=passes[-1].run)
        vae.latent_shape(cfg.sampling.num_frames, cfg.sampling.height, cfg.sampling.width)


SMALL = {"ltx": ["options.multiscale=false", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9"]}


@pytest.mark.parametrize("family", FAMILIES)
@settings(**examples("config"))
@given(data=st.data())
def test_family_checkpoint_configs(family, data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "c")
        copy_folder(tiny(family), folder)
        done = [data.draw(json_mutation(folder)) for _ in range(data.draw(st.integers(1, 2)))]
        full = data.draw(st.integers(0, 39)) == 0  # the dry run and the VAE build: slow, so one input in 40
        check_contract(outcomes("config", family),
                       lambda: open_before_weights(family, [f"model.checkpoint={folder}", *SMALL.get(family, [])],
                                                   full),
                       label=f"{family}; " + "; ".join(done))


# ---- run options ---------------------------------------------------------------------------------------------

CORE_KEYS = ["sampling.num_frames", "sampling.height", "sampling.width", "sampling.num_steps",
             "sampling.guidance_scale", "sampling.max_sequence_length", "sampling.seed", "vae.tiling",
             "sampling.scheduler", "offload.chunk_size", "output.fps"]
OPTION_VALUES = st.one_of(
    JUNK, st.sampled_from(["'{} {'", "'{x} {}'", "'{0} {}'", "'{}{.a}'", "'{!r}'", "'{:>999999999}'", "'{}'",
                           "'{{}} {}'", "'a {} b'", "100000", "-5", "1e-300", "2.5e1", ".inf", ".nan", "null",
                           "[{image: nowhere.png}]", "[[1, 2]]", "{framewise: 'no'}", "{enabled: 'no'}",
                           "{tile_sample_min_height: .inf}", "{1: 2}", "{name: unipc, flow_shift: 1e308}",
                           "{name: unipc, flow_shift: 3e0}", "[1000, 500, 0]", "[]"]),
    st.text(alphabet="{}x0:!.[] ", max_size=8).map(lambda s: "'" + s.replace("'", "") + "'"),
)


def _override(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value) if not (isinstance(value, float) and not np.isfinite(value)) else str(value)


def use_options(family: str, model_id: str, overrides: list[str]) -> None:
    """The pre-run checks, then what the run does with an accepted option before weights (and the prompt
    template as encode_prompt fills it)."""
    from vidax_core.runner import plan as planning
    from vidax_core.runner.preflight import preflight

    plugins = get_plugins()
    cfg = config.resolve(os.path.join(ROOT, FAMILIES[family][2]),
                         [f"model.id={model_id}", *overrides], plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins, check_outputs=False)
    if family == "hunyuan":
        from vidax_hunyuan import presets

        tpl = cfg.options.get("prompt_template") or (presets.I2V_TEMPLATE if "i2v" in model_id else
                                                     presets.T2V_TEMPLATE)
        tpl.format("a prompt")
        crop = cfg.options.get("crop_start")
        assert crop is None or crop <= len(tpl.encode()) + 8, f"crop_start {crop} passed the check"
    from vidax_core.io.run_checkpoint import checkpoint_for_run

    ckpt = checkpoint_for_run(cfg, spec, plugins)
    for p in planning.sampling_passes(spec, ckpt, cfg, plugins):
        sampler = planning.select_sampler(spec, ckpt, p.run, plugins)
        grid = plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=p.run)
        if grid is not None:
            planning.sampling_plan(spec, ckpt, p.run, plugins, sampler, tuple(int(v) for v in grid))


def _options_surface(family: str, data, surface: str) -> None:
    plugins = get_plugins()
    model_id = data.draw(st.sampled_from(sorted({FAMILIES[family][0], FAMILIES[family][1]})))
    spec = plugins.registry.get(model_id)
    keys = [f"options.{k}" for k in spec.options] + CORE_KEYS
    n = data.draw(st.integers(0, 3))
    defaults = st.sampled_from([_override(o.default) for o in spec.options.values()] or ["null"])
    overrides = [f"{data.draw(st.sampled_from(keys))}={data.draw(st.one_of(OPTION_VALUES.map(_override), defaults))}"
                 for _ in range(n)]
    if "i2v" in model_id:
        overrides.append(f"image={first_frame()}")
    overrides = [o for o in overrides if "\0" not in o]
    check_contract(outcomes(surface, family), lambda: use_options(family, model_id, overrides),
                   label=f"{model_id}; {overrides}")


@pytest.mark.parametrize("family", FAMILIES)
@settings(**examples("options"))
@given(data=st.data())
def test_family_options(family, data):
    _options_surface(family, data, "options")


# ---- conditioning media --------------------------------------------------------------------------------------

def _png(w=16, h=16) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (20, 130, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _png_header(w: int, h: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + _chunk(b"IEND", b"")


_MP4: list[bytes] = []
_FRAME: list[str] = []


def first_frame() -> str:
    """A valid png for the image-to-video ids (made once per session)."""
    if not _FRAME:
        path = os.path.join(tempfile.mkdtemp(prefix="vidax-fuzz-"), "first.png")
        open(path, "wb").write(_png(32, 32))
        _FRAME.append(path)
    return _FRAME[0]


def _mp4() -> bytes:
    if not _MP4:
        from vidax_core.io.video import write_mp4

        with tempfile.TemporaryDirectory() as tmp:
            write_mp4(os.path.join(tmp, "c.mp4"), np.full((5, 16, 16, 3), 0.5, np.float32), 8)
            _MP4.append(open(os.path.join(tmp, "c.mp4"), "rb").read())
    return _MP4[0]


@st.composite
def medium(draw, video: bool):
    base = _mp4() if video else draw(st.sampled_from(["png", "jpeg"]))
    raw = bytearray(base if video else (_png() if base == "png" else _jpeg()))
    kind = draw(st.sampled_from(["ok", "truncate", "flip", "flip", "bomb", "huge", "empty", "random", "text"]))
    if kind == "truncate":
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            raw[draw(st.integers(0, len(raw) - 1))] ^= draw(st.integers(1, 255))
    elif kind == "bomb":
        raw = bytearray(_png_header(draw(st.sampled_from([100000, 2**31 - 1, 20000])),
                                    draw(st.sampled_from([100000, 1, 20000]))))
    elif kind == "huge":
        raw = bytearray(_png_header(draw(st.integers(1, 2**31 - 1)), draw(st.integers(1, 2**31 - 1))))
    elif kind == "empty":
        raw = bytearray()
    elif kind == "random":
        raw = bytearray(draw(st.binary(max_size=64)))
    elif kind == "text":
        raw = bytearray(b"not a medium\n")
    return bytes(raw), f"{'video' if video else base} {kind}"


def use_medium(family: str, model_id: str, key: str, path: str, video: bool) -> None:
    from vidax_core.io.clip import read_video
    from vidax_core.io.image import load_image, preprocess_image
    from vidax_core.runner.preflight import preflight

    plugins = get_plugins()
    overrides = [f"model.id={model_id}", *SMALL.get(family, [])]
    if key == "conditions":
        overrides += ["options.pipeline=condition", f"options.conditions=[{{{'video' if video else 'image'}: {path}}}]"]
    else:
        overrides.append(f"{key}={path}")
        if key == "video" and family == "ltx":
            overrides.append("options.pipeline=condition")
    cfg = config.resolve(os.path.join(ROOT, FAMILIES[family][2]), overrides, plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins, check_outputs=False)
    if video:  # accepted by the pre-run check: the run's reader must take it too
        read_video(path, height=16, width=16, max_frames=4)
    else:
        preprocess_image(load_image(path), 16, 16)


MEDIA_KEYS = {"wan": [("image", False)], "cosmos": [("image", False), ("video", True)],
              "cogvideox": [("image", False)], "ltx": [("image", False), ("video", True), ("conditions", False),
                                                        ("conditions", True)], "hunyuan": [("image", False)]}


@pytest.mark.parametrize("family", FAMILIES)
@settings(**examples("media"))
@given(data=st.data())
def test_family_conditioning_media(family, data):
    key, video = data.draw(st.sampled_from(MEDIA_KEYS[family]))
    if video and data.draw(st.integers(0, 2)):  # ffmpeg is slow: most inputs are images
        key, video = MEDIA_KEYS[family][0]
    raw, what = data.draw(medium(video))
    model_id = FAMILIES[family][1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.mp4" if video else "m.png")
        open(path, "wb").write(raw)
        check_contract(outcomes("media", family), lambda: use_medium(family, model_id, key, path, video),
                       label=f"{model_id} {key}: {what}")


# ---- family-specific surfaces --------------------------------------------------------------------------------

TEMPLATE_PIECES = [
    "{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}{{ c['text'] }}{% endfor %}\n{% endfor %}",
    "{{ messages }}", "{{ nope.attr }}", "{% for %}", "{{ raise_exception('no') }}", "{{ ''.__class__.__mro__ }}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{% for i in range(10**9) %}x{% endfor %}",
    "{{ 'x' * 10**9 }}", "{{ 10**10**10 }}", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}", "{% macro d(s, n) %}{{ d(s ~ s, n - 1) if n else s }}{% endmacro %}{{ d('x', 60) }}",
    "{{ 'x'.ljust(10**9) }}", "{{ 'x'|center(10**9) }}", "{{ '%999999999s'|format(1) }}",
    "{{ '{:>999999999}'.format(1) }}", "{{ messages|tojson }}", "{% if add_generation_prompt %}A:{% endif %}",
    "{{ bos_token }}", "{% set x = namespace(a=1) %}{{ x.a }}", "{{ messages[0]['content'][0]['text']|upper }}",
    "{{ (messages|length) / 0 }}", "{{ range(5)|list }}", "{%", "{{", "}}", "{# c #}", "\xff", "\x00",
    "{% for m in messages %}{{ loop.cycle('a', 'b') }}{% break %}{% endfor %}",
]


def use_template(folder: str) -> None:
    from vidax_core.encoders.chat_template import load_chat_template, render_chat
    from vidax_cosmos.text import check_template, _messages

    problems = check_template(folder)
    if problems:
        from vidax_core.errors import UserError

        raise UserError(problems[0])
    render_chat(load_chat_template(folder), _messages("a fuzzed prompt {} %s"), add_generation_prompt=False,
                special={}, add_vision_id=False)


def _template_surface(data) -> None:
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(TEMPLATE_PIECES), st.text(max_size=6)), min_size=1,
                                max_size=4))
    raw = "".join(pieces).encode("utf-8", "surrogatepass")
    if data.draw(st.integers(0, 9)) == 0:
        raw = raw[: data.draw(st.integers(0, len(raw)))] + b"\xfe"
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "tokenizer")
        shutil.copytree(os.path.join(tiny("cosmos"), "tokenizer"), folder)
        open(os.path.join(folder, "chat_template.jinja"), "wb").write(raw)
        check_contract(outcomes("template", "cosmos"), lambda: use_template(folder), label=repr(raw[:120]))


def _original_ltx_surface(data) -> None:
    """An original LTX-Video single file whose metadata config holds junk (latent_channels {})."""
    from safetensors.numpy import save_file

    t = json.loads(open(os.path.join(tiny("ltx"), "transformer", "config.json")).read())
    v = json.loads(open(os.path.join(tiny("ltx"), "vae", "config.json")).read())
    meta = {"transformer": {k: t[k] for k in ("num_attention_heads", "attention_head_dim", "num_layers",
                                               "in_channels", "out_channels", "cross_attention_dim",
                                               "caption_channels", "norm_eps") if k in t},
            "vae": v}
    meta["transformer"].update(positional_embedding_max_pos=[20, 2048, 2048], positional_embedding_theta=10000.0,
                               qk_norm="rms_norm")
    done = [mutate_json_value(data.draw, meta) for _ in range(data.draw(st.integers(1, 2)))]
    text = json.dumps(meta, ensure_ascii=False)
    if data.draw(st.integers(0, 9)) == 0:
        text = text[: data.draw(st.integers(0, len(text)))]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "orig")
        os.makedirs(folder)
        for comp in ("text_encoder", "tokenizer"):
            copy_folder(os.path.join(tiny("ltx"), comp), os.path.join(folder, comp))
        save_file({"vae.decoder.conv_in.conv.bias": np.zeros(2, np.float32),
                   "model.diffusion_model.proj_out.bias": np.zeros(2, np.float32)},
                  os.path.join(folder, "ltxv-tiny.safetensors"),
                  metadata={"config": text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")})
        check_contract(outcomes("original", "ltx"),
                       lambda: open_before_weights("ltx", [f"model.checkpoint={folder}", *SMALL["ltx"]], False),
                       label="; ".join(done))


@pytest.mark.parametrize("family", FAMILIES)
@settings(**examples("specific"))
@given(data=st.data())
def test_family_specific(family, data):
    kind = SPECIFIC[family]
    if kind == "template":
        _template_surface(data)
    elif kind == "original":
        _original_ltx_surface(data)
    elif kind == "format":
        _options_surface(family, data, "format")
    elif kind == "options":
        _options_surface(family, data, "options")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, "c")
            copy_folder(tiny(family), folder)
            done = data.draw(json_mutation(folder))
            check_contract(outcomes("config", family),
                           lambda: open_before_weights(family, [f"model.checkpoint={folder}"], False), label=done)


# ---- initial noise -------------------------------------------------------------------------------------------

NOISE_SHAPES = {"one": (1, 4, 2, 8, 8), "two": {"video": (1, 6, 4), "audio": (1, 3, 2)}}


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


@st.composite
def noise_file(draw):
    kind = draw(st.sampled_from(["npy", "npy", "npz", "header"]))
    shape = NOISE_SHAPES["one"]
    if kind == "header":  # a handwritten header: any dtype text, any shape
        descr = draw(st.sampled_from(["<U0", "|V0", "|S0", "<f4", "<f8", "|O", "<c8", "<i2", "|b1", "<M8",
                                      "[('a', '<f4')]", "'<f4'", "x", "<f0", "<f16"]))
        dims = draw(st.sampled_from(["(-1,)", "()", str(shape), "(2**62,)", "(1, 4, 2, 8, 8, 0)", "[1]", "(1.5,)"]))
        text = f"{{'descr': {descr if descr.startswith('[') or descr.startswith(chr(39)) else repr(descr)}, " \
               f"'fortran_order': {draw(st.sampled_from(['False', 'True', '0', 'None']))}, 'shape': {dims}, }}"
        body = text.encode() + b" " * draw(st.integers(0, 70)) + b"\n"
        version = draw(st.sampled_from([1, 2, 3, 9]))
        size = struct.pack("<H", len(body)) if version == 1 else struct.pack("<I", len(body))
        raw = b"\x93NUMPY" + bytes([version, 0]) + size + body + draw(st.binary(max_size=64))
        return raw, f"header {text[:80]} v{version}", "one"
    if kind == "npy":
        dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, np.int8, np.uint16]))
        raw = bytearray(_npy(np.zeros(shape, dtype)))
        how = draw(st.sampled_from(["ok", "truncate", "flip", "append"]))
        if how == "truncate":
            raw = raw[: draw(st.integers(0, len(raw) - 1))]
        elif how == "flip":
            for _ in range(draw(st.integers(1, 3))):
                raw[draw(st.integers(0, min(len(raw) - 1, 140)))] ^= draw(st.integers(1, 255))
        elif how == "append":
            raw += draw(st.binary(min_size=1, max_size=16))
        return bytes(raw), f"npy {np.dtype(dtype).name} {how}", "one"
    arrays = {k: np.zeros(s, np.float32) for k, s in NOISE_SHAPES["two"].items()}
    if draw(st.booleans()):
        arrays.pop(draw(st.sampled_from(sorted(arrays))))
    buf = io.BytesIO()
    (np.savez_compressed if draw(st.booleans()) else np.savez)(buf, **arrays)
    raw = bytearray(buf.getvalue())
    how = draw(st.sampled_from(["ok", "truncate", "flip", "member"]))
    if how == "truncate":
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        for _ in range(draw(st.integers(1, 3))):
            raw[draw(st.integers(0, len(raw) - 1))] ^= draw(st.integers(1, 255))
    elif how == "member":  # a member whose .npy header is junk
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("video.npy", draw(st.binary(max_size=80)))
            z.writestr("audio.npy", _npy(arrays.get("audio", np.zeros(NOISE_SHAPES["two"]["audio"], np.float32))))
        raw = bytearray(out.getvalue())
    return bytes(raw), f"npz {sorted(arrays)} {how}", draw(st.sampled_from(["one", "two"]))


def use_noise(path: str, streams: str) -> None:
    from vidax_core.io import noise

    noise.check_noise_file(path)
    if streams == "one":
        noise.load_initial_noise(path, NOISE_SHAPES["one"])
    else:
        noise.load_npz_noise(path, NOISE_SHAPES["two"])


@settings(**{**fuzz_settings(default=PER_FAMILY), "max_examples": PER_FAMILY})
@given(data=st.data())
def test_initial_noise_files(data):
    raw, what, streams = data.draw(noise_file())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "n.npz" if streams == "two" else "n.npy")
        open(path, "wb").write(raw)
        check_contract(outcomes("noise", "core"), lambda: use_noise(path, streams), label=what)
