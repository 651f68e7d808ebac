"""Property-based fuzzing of what rides along with weights: a LoRA adapter's peft metadata and scale,
and the per-layer tags of an 8-bit checkpoint.

* LoRA: a small diffusers-layout adapter for the tiny Wan DiT whose ``lora_adapter_metadata`` holds a drawn peft
  config (junk ``lora_alpha``, ``r``, ``alpha_pattern``, ``rank_pattern``, ``use_rslora``; NaN and huge numbers,
  broken regular expressions, deep nesting, not JSON at all) and whose entry has a drawn ``scale``; it is read and
  checked against the checkpoint as a run does (``vidax_core.lora.prepare``), then every tensor it touches is fused.
  Properties of an accepted adapter: each fused tensor is finite, and ``vidax lora inspect`` describes it.
* 8-bit: the tiny transformer's first layer stored int8 or float8 with a ComfyUI ``comfy_quant`` tag tensor
  and/or a ``_quantization_metadata`` entry of drawn JSON (formats, ``params`` of every type, nesting past the
  recursion limit, bytes that are not UTF-8); the file's layout is read and every weight dequantised as a load
  does (``vidax_core.quant.policy.tensors_for_load``).

The contract (tests/test_fuzz_contract.py): success or one :class:`UserError` line, quickly.
"""

from __future__ import annotations

import json
import math
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings, report_all
from vidax_core.io.safetensors import SafetensorsFile, save_file
from vidax_core.testing.assets import asset_folder

OUTCOMES = {name: Outcomes(name) for name in ("lora metadata", "8-bit tags")}
Q = "blocks.0.attn1.to_q"
MODULES = ("blocks.0.attn1.to_q", "blocks.0.attn1.to_k", "blocks.1.ffn.net.0.proj")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    report_all(OUTCOMES.values())


JUNK = st.one_of(
    st.sampled_from([0, -1, 1, 4, 8, 2**63, 10**400, 0.5, 1e-300, 1e38, 1e308, math.inf, -math.inf, math.nan, "",
                     "x", "8", None, True, False, [], [1], {}, {"a": 1}, "(", "to_q", ".*", "[", "a{99999}",
                     "(?P<x>", "\ud800"]),
    st.integers(), st.floats(), st.text(max_size=6))
PATTERNS = st.one_of(st.sampled_from(["to_q", "attn1.to_k", ".*", "(", "[", "blocks\\.0.*", "(?i)TO_Q", "x{2,1}",
                                      "a" * 300, "\\", "(?<=a)b", "(a)(?(1)b|c)"]), st.text(max_size=6))


@st.composite
def peft_metadata(draw):
    """The ``lora_adapter_metadata`` text of an adapter (None: no metadata)."""
    kind = draw(st.sampled_from(["config"] * 6 + ["none", "raw", "deep", "list"]))
    if kind == "none":
        return None
    if kind == "raw":
        return draw(st.sampled_from(["{", "NaN", "", "null", '"x"', "[1]"])) if draw(st.booleans()) else \
            draw(st.text(max_size=20))
    if kind == "deep":
        return "{\"transformer.lora_alpha\": " + "[" * 100_000 + "]" * 100_000 + "}"
    if kind == "list":
        return json.dumps([draw(JUNK)], allow_nan=True)
    cfg = {}
    for key in draw(st.lists(st.sampled_from(["r", "lora_alpha", "alpha_pattern", "rank_pattern", "use_rslora",
                                               "target_modules", "lora_bias", "junk"]), max_size=5, unique=True)):
        if key in ("alpha_pattern", "rank_pattern") and draw(st.integers(0, 3)):
            cfg[key] = draw(st.dictionaries(PATTERNS, JUNK, max_size=3))
        else:
            cfg[key] = draw(JUNK)
    prefix = draw(st.sampled_from(["transformer.", "transformer.", ""]))
    return json.dumps({f"{prefix}{k}": v for k, v in cfg.items()}, allow_nan=True, ensure_ascii=False)


@pytest.fixture(scope="module")
def wan():
    """The tiny Wan checkpoint opened as a run opens it, its denoiser builds and its transformer tensors."""
    from vidax_core import config
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins
    from vidax_core.runner.denoiser import build_dit

    plugins = get_plugins()
    cfg = config.resolve(None, ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random"],
                         plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    return plugins, spec, ckpt, build_dit(spec, ckpt, cfg, plugins), cfg


def _adapter(path: str, meta: str | None, rank: int, std: float) -> str:
    tensors = {}
    rng = np.random.default_rng(0)
    shapes = {"blocks.0.attn1.to_q": (24, 24), "blocks.0.attn1.to_k": (24, 24), "blocks.1.ffn.net.0.proj": (32, 24)}
    for m in MODULES:
        out, inp = shapes[m]
        tensors[f"transformer.{m}.lora_A.weight"] = rng.normal(0, std, (rank, inp)).astype(np.float32)
        tensors[f"transformer.{m}.lora_B.weight"] = rng.normal(0, std, (out, rank)).astype(np.float32)
    save_file(tensors, path, metadata={"format": "pt", **({} if meta is None else {"lora_adapter_metadata": meta})})
    return path


@settings(**fuzz_settings(default=20))
@given(meta=peft_metadata(), scale=st.sampled_from([1.0, 0.0, -0.8, 2.5, 1e10, 1e30, 1e300, -1e300]),
       rank=st.sampled_from([1, 4]), std=st.sampled_from([0.1, 1e3, 1e18]))
def test_lora_metadata_contract(tmp_path_factory, wan, meta, scale, rank, std):
    import dataclasses

    from vidax_core import lora
    from vidax_core.config import LoraEntry
    from vidax_core.lora.inspect import describe

    plugins, spec, ckpt, builds, cfg = wan
    path = _adapter(str(tmp_path_factory.mktemp("lora") / "a.safetensors"), meta, rank, std)

    def prepare_and_fuse():
        run = dataclasses.replace(cfg, lora=(LoraEntry(path=path, scale=scale),))
        prepared = lora.prepare(run, spec, ckpt, builds, plugins)
        tensors = ckpt.read_tensors("transformer")
        view = prepared.fused("transformer", tensors)
        for key in prepared.deltas.get("transformer", {}):
            w = np.asarray(view[key])
            assert np.isfinite(w).all(), f"{key}: an accepted adapter fused to non-finite weights"
        describe(path, spec.id)

    check_contract(OUTCOMES["lora metadata"], prepare_and_fuse, label=f"scale={scale} rank={rank} std={std} "
                                                                       f"meta={str(meta)[:200]}")


# ---- 8-bit tags ---------------------------------------------------------------------------------------------------

FORMATS = st.sampled_from(["float8_e4m3fn", "float8_e5m2", "int8_tensorwise", "nvfp4", "mxfp8", "", None, 5, [1],
                           {"a": 1}])
PARAMS = st.one_of(st.none(), JUNK, st.dictionaries(st.sampled_from(["convrot", "group_size", "x"]), JUNK,
                                                    max_size=2))


@st.composite
def tag_texts(draw):
    """The JSON text of one layer's tag (a comfy_quant tensor or a metadata entry)."""
    kind = draw(st.sampled_from(["object"] * 6 + ["deep", "junk", "text"]))
    if kind == "deep":
        return "[" * 100_000 + "]" * 100_000
    if kind == "junk":
        return json.dumps(draw(JUNK), allow_nan=True)
    if kind == "text":
        return draw(st.text(max_size=20))
    conf = {"format": draw(FORMATS)}
    if draw(st.booleans()):
        conf["params"] = draw(PARAMS)
    if draw(st.integers(0, 3)) == 0:
        conf["convrot"] = draw(JUNK)
    return json.dumps(conf, allow_nan=True)


def _parsed(text: str):
    """A tag's text as the JSON value it holds (the text itself when it holds none or is nested too deeply)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


@st.composite
def eight_bit(draw):
    """(how the first layer is stored, its tag tensor text or None, the metadata text or None, scale shape)."""
    dtype = draw(st.sampled_from(["int8", "float8_e4m3fn", "float8_e5m2", "uint8"]))
    valid = json.dumps({"format": {"int8": "int8_tensorwise", "uint8": "int8_tensorwise"}.get(dtype, dtype)})
    tag = draw(st.one_of(st.none(), st.just(valid), tag_texts(),
                         st.binary(max_size=12).map(lambda b: b.decode("latin1"))))
    meta = None
    if draw(st.booleans()):
        layers = draw(st.one_of(st.dictionaries(st.sampled_from([Q, Q, "blocks.0.attn1.to_k", "nope", ""]),
                                                tag_texts().map(_parsed), max_size=2), JUNK))
        meta = draw(st.one_of(st.just(json.dumps({"layers": layers}, allow_nan=True)), tag_texts()))
    scale = draw(st.sampled_from([(), (24,), (24, 1)] * 3 + [(1,), (3,), (24, 2)]))
    value = draw(st.sampled_from([0.01] * 6 + [0.0, -1.0, math.nan, math.inf, 1e30]))
    return dtype, tag, meta, scale, value


_BASE: dict = {}


def _base_tensors() -> dict:
    if not _BASE:
        f = SafetensorsFile(os.path.join(asset_folder("vidax_wan"), "transformer",
                                         "diffusion_pytorch_model.safetensors"))
        _BASE.update({k: np.array(f[k]) for k in f})
    return _BASE


@settings(**fuzz_settings(default=20))
@given(case=eight_bit(), with_scale=st.integers(0, 6))
def test_quant_tags_contract(tmp_path_factory, case, with_scale):
    from vidax_core.quant.policy import tensors_for_load

    dtype, tag, meta, scale_shape, value = case
    tensors = dict(_base_tensors())
    w = tensors[Q + ".weight"]
    store = {"int8": np.int8, "uint8": np.uint8, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
             "float8_e5m2": ml_dtypes.float8_e5m2}[dtype]
    tensors[Q + ".weight"] = np.clip(np.round(w * 100), -127, 127).astype(store)
    if with_scale:
        tensors[Q + ".weight_scale"] = np.full(scale_shape, value, np.float32)
    if tag is not None:
        tensors[Q + ".comfy_quant"] = np.frombuffer(tag.encode("utf-8", "surrogatepass"), np.uint8).copy()
    path = str(tmp_path_factory.mktemp("q") / "t.safetensors")
    save_file(tensors, path, metadata=None if meta is None else {"_quantization_metadata": meta})

    def read_like_a_load():
        source = SafetensorsFile(path)
        view = tensors_for_load(source, path)
        for k in view:
            np.asarray(view[k], np.float32)

    check_contract(OUTCOMES["8-bit tags"], read_like_a_load, label=f"{dtype} scale {scale_shape}={value} "
                                                                    f"tag={str(tag)[:80]!r} meta={str(meta)[:120]!r}")
