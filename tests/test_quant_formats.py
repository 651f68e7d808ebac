"""8-bit Wan DiT weights: every downloadable 8-bit layout, in diffusers and original key names, and
at-load quantization, against diffusers' WanTransformer3DModel run with the dequantised weights.

The files are written here with the layouts' real key names, quantized by this test's own numpy code (per tensor
absmax for fp8, per output row for int8, as ComfyUI and LightX2V write them); the reference model gets
``w.float() * scale``. At-load quantization is compared with diffusers given the weights round-tripped through the
same quantizer (``vidax_core.quant.modes.quantize``). One jitted forward per weight dtype serves every case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.io.checkpoint import TensorSource  # noqa: E402
from vidax_core.io.convert import convert  # noqa: E402
from vidax_core.io.renamed import RenamedTensors  # noqa: E402
from vidax_core.io.safetensors import save_file  # noqa: E402
from vidax_core.model_api import DitBuild  # noqa: E402
from vidax_core.nn.state import abstract_model, materialize  # noqa: E402
from vidax_core.quant import modes, policy  # noqa: E402
from vidax_core.quant.keep import DEFAULT_KEEP  # noqa: E402
from vidax_core.quant.source import read_layout  # noqa: E402
from vidax_core.testing.tiny.wan import TINY_DIT_CONFIG  # noqa: E402
from vidax_core.testing.tiny.wan_original_keys import DIT_INV, inverse  # noqa: E402
from vidax_wan import original_format as of  # noqa: E402
from vidax_wan.convert_dit import DIT_IGNORE, DIT_RULES  # noqa: E402
from vidax_wan.dit import WanDiT, WanDiTConfig  # noqa: E402
from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
E4M3 = ml_dtypes.float8_e4m3fn
BLOCK_LINEAR = re.compile(r"blocks\.\d+\.(attn[12]\.(to_[qkv]|to_out\.0)|ffn\.net\.(0\.proj|2))\.weight")
# outside the blocks: Wan's named layers (vidax_wan.plugin.QUANTIZED_OUTSIDE_BLOCKS, 8-bit at load with
# model.quantize_outside_blocks), 8-bit in ComfyUI's scaled fp8 Wan files, full precision in LightX2V's
OUTSIDE_LINEAR = re.compile(r"condition_embedder\.(time_embedder\.linear_[12]|time_proj"
                            r"|text_embedder\.linear_[12])\.weight")
OTHER_LINEAR = re.compile(r"proj_out\.weight")  # fp8 in ComfyUI's files (head.head)


def _held(dtype):
    """``dtype`` as this process's default device holds 8-bit kernels (float8 as its uint8 bits on CPU)."""
    from vidax_core.quant.cpu_bits import held_dtype

    return held_dtype(dtype, None)


@pytest.fixture(scope="module")
def reference():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    kwargs = {k: v for k, v in TINY_DIT_CONFIG.items()}
    kwargs["patch_size"] = tuple(kwargs["patch_size"])
    model = WanTransformer3DModel(**kwargs).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.1)
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)
    return model, {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 4, 3, 8, 8)).astype(np.float32), np.array([999.0, 250.5], np.float32),
            rng.standard_normal((2, 7, 16)).astype(np.float32))


def _fp8_tensor(w):
    s = np.float32(np.abs(w).max() / 448.0)
    return (w / s).astype(E4M3), s


def _rows(w, top, dtype):
    s = (np.abs(w).max(axis=1, keepdims=True) / top).astype(np.float32)
    q = np.clip(np.round(w / s), -top, top) if dtype == np.int8 else np.clip(w / s, -top, top)
    return q.astype(dtype), s


def write_layout(layout: str, tensors: dict) -> tuple[dict, dict, dict]:
    """(file tensors, safetensors metadata, dequantised torch-layout weights) of ``layout``."""
    out, meta, deq, layers = {}, {}, {}, {}
    for k, w in tensors.items():
        layer = k[: -len(".weight")]
        comfy = not layout.startswith("lightx2v")
        if BLOCK_LINEAR.fullmatch(k) or (comfy and (OUTSIDE_LINEAR.fullmatch(k) or OTHER_LINEAR.fullmatch(k))):
            if layout == "fp8-plain":
                q, s = w.astype(E4M3), np.float32(1.0)
            elif layout in ("scaled_fp8", "comfy-tag", "comfy-metadata"):
                q, s = _fp8_tensor(w)
            elif layout in ("comfy-int8", "lightx2v-int8"):
                q, s = _rows(w, 127.0, np.int8)
            else:  # lightx2v-fp8
                q, s = _rows(w, 448.0, E4M3)
            out[k] = q
            if layout == "scaled_fp8":
                out[layer + ".scale_weight"] = np.asarray(s, np.float32)
            elif layout != "fp8-plain":
                out[layer + ".weight_scale"] = np.asarray(s, np.float32)
            if layout in ("comfy-tag", "comfy-int8"):
                conf = {"format": "int8_tensorwise" if layout == "comfy-int8" else "float8_e4m3fn"}
                out[layer + ".comfy_quant"] = np.frombuffer(json.dumps(conf).encode(), np.uint8).copy()
            layers[layer] = {"format": "float8_e4m3fn"}
            deq[k] = q.astype(np.float32) * s
        else:
            out[k] = w
            if OUTSIDE_LINEAR.fullmatch(k):  # quantized at load in the run's mode (the kernel layout: w.T)
                qk, sk = modes.quantize(w.T, "int8" if "int8" in layout else "float8_e4m3fn")
                deq[k] = modes.dequantize(qk, sk).T
    if layout == "scaled_fp8":
        out["scaled_fp8"] = np.zeros(2, E4M3)
        out["blocks.0.attn1.to_q.scale_input"] = np.ones((), np.float32)
    if layout == "comfy-metadata":
        meta["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers})
    return out, meta, deq


def _original(out: dict, meta: dict) -> tuple[dict, dict]:
    """The same file in the original Wan key names (``blocks.N.self_attn.q.weight``)."""
    names = {k: (k if k == "scaled_fp8" else inverse(k, DIT_INV)) for k in out}
    if meta:
        layers = json.loads(meta["_quantization_metadata"])["layers"]
        meta = {"_quantization_metadata": json.dumps(
            {"layers": {inverse(k + ".weight", DIT_INV)[:-7]: v for k, v in layers.items()}})}
    return {names[k]: v for k, v in out.items()}, meta


_FWD = jax.jit(lambda m, *a: m(*a))


def _vidax(source, mode_key=None):
    cfg = WanDiTConfig.from_config(TINY_DIT_CONFIG)
    notes = []
    lay = read_layout(source)
    tensors = policy.tensors_for_load(source, "tiny", log=notes.append)
    build = policy.apply(DitBuild.of(WanDiT, cfg, in_channels=4), mode_key or lay.mode, DEFAULT_KEEP,
                         QUANTIZED_OUTSIDE_BLOCKS)  # Wan's named layers 8-bit, whatever the file stores
    graphdef, state, flat = abstract_model(build.ctor)
    return materialize(graphdef, state, convert(tensors, DIT_RULES, flat, ignore=DIT_IGNORE)), lay, notes


def _want(model_t, deq, inputs):
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in deq.items()}
    saved = {k: v.clone() for k, v in model_t.state_dict().items()}
    try:
        model_t.load_state_dict({**saved, **sd})
        with torch.no_grad():
            return model_t(*map(torch.from_numpy, inputs), return_dict=False)[0].numpy()
    finally:
        model_t.load_state_dict(saved)


def _rel(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


LAYOUTS = [("fp8-plain", "fp8"), ("scaled_fp8", "scaled_fp8"), ("comfy-tag", "comfy_quant"),
           ("comfy-metadata", "comfy_quant"), ("comfy-int8", "comfy_quant"), ("lightx2v-int8", "lightx2v"),
           ("lightx2v-fp8", "lightx2v")]


@pytest.mark.parametrize("keys", ["diffusers", "original"])
@pytest.mark.parametrize("layout,name", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_layout_matches_diffusers_with_dequantised_weights(layout, name, keys, reference, inputs, tmp_path):
    model_t, tensors = reference
    out, meta, deq = write_layout(layout, tensors)
    if keys == "original":
        out, meta = _original(out, meta)
    path = str(tmp_path / "dit.safetensors")
    save_file(out, path, metadata=meta)
    source = TensorSource([path])
    if keys == "original":
        source = RenamedTensors(source, of.dit_key)
    model, lay, notes = _vidax(source)
    assert lay.name == name
    want_mode = "int8" if "int8" in layout else "float8_e4m3fn"
    assert lay.mode == want_mode
    q = model.blocks.attn1.to_q
    held = _held(modes.storage_dtype(want_mode))
    assert np.dtype(q.kernel[...].dtype) == held  # stays 8-bit on the device
    for lin in (model.time_linear_1, model.time_linear_2, model.time_proj, model.text_linear_1, model.text_linear_2):
        assert np.dtype(lin.kernel[...].dtype) == held  # outside the blocks, 8-bit too
    assert np.dtype(model.proj_out.kernel[...].dtype) == np.float32  # the head: full precision (dequantised)
    # the file's own 8-bit values, not re-rounded: layer 0's q kernel is the file's q weight transposed, and so
    # is the time projection's kernel where the file stores it 8-bit
    fkey = "blocks.0.attn1.to_q.weight" if keys == "diffusers" else "blocks.0.self_attn.q.weight"
    np.testing.assert_array_equal(np.asarray(q.kernel[...][0]).view(np.uint8), out[fkey].T.view(np.uint8))
    tkey = "condition_embedder.time_proj.weight" if keys == "diffusers" else "time_projection.1.weight"
    if modes.is_8bit(out[tkey].dtype):
        np.testing.assert_array_equal(np.asarray(model.time_proj.kernel[...]).view(np.uint8),
                                      out[tkey].T.view(np.uint8))
    if layout == "scaled_fp8":
        assert any("ignored" in n and "scale_input" in n for n in notes), notes
    got = np.asarray(_FWD(model, *map(jnp.asarray, inputs)))
    want = _want(model_t, deq, inputs)
    rel = _rel(got, want)
    print(f"{layout} ({keys} keys): rel {rel:.2e}")
    assert rel <= 1e-4, rel


@pytest.mark.parametrize("mode", ["float8_e4m3fn", "int8"])
def test_at_load_quantization_matches_round_tripped_weights(mode, reference, inputs, tmp_path):
    """A fp32 checkpoint with ``model.weight_dtype``: the block weights (and Wan's embedder MLPs and time
    projection) quantized at load equal diffusers given
    the weights round-tripped through the same quantizer (in the kernel layout: per output channel)."""
    model_t, tensors = reference
    path = str(tmp_path / "dit.safetensors")
    save_file(tensors, path)
    model, lay, _ = _vidax(TensorSource([path]), mode)
    assert lay.name is None
    deq = {}
    for k, w in tensors.items():
        if BLOCK_LINEAR.fullmatch(k) or OUTSIDE_LINEAR.fullmatch(k):
            qk, s = modes.quantize(w.T, mode)
            deq[k] = modes.dequantize(qk, s).T
    got = np.asarray(_FWD(model, *map(jnp.asarray, inputs)))
    want = _want(model_t, deq, inputs)
    plain = _want(model_t, {}, inputs)
    rel = _rel(got, want)
    print(f"at-load {mode}: rel {rel:.2e} vs round-tripped weights, {_rel(got, plain):.2e} vs fp32 weights")
    assert rel <= 1e-4, rel
    assert _rel(got, plain) > 1e-4  # the weights really are 8-bit


def test_quantizer_scales():
    """fp8: one absmax/448 scale per tensor; int8: amax/127 per output channel (last kernel axis); all-zero
    channels get scale 1; values round-trip within half a step."""
    from vidax_core.config import WEIGHT_DTYPES

    assert WEIGHT_DTYPES == modes.WEIGHT_DTYPES  # the run key accepts exactly the quantizer's modes
    rng = np.random.default_rng(1)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    w[:, 2] = 0.0
    q, s = modes.quantize(w, "int8")
    assert q.dtype == np.int8 and s.shape == (1, 5)
    np.testing.assert_allclose(s[0, [0, 1, 3, 4]], np.abs(w).max(axis=0)[[0, 1, 3, 4]] / 127, rtol=1e-6)
    assert s[0, 2] == 1.0 and np.all(q[:, 2] == 0)
    assert np.max(np.abs(modes.dequantize(q, s) - w) / s) <= 0.5 + 1e-6
    q8, s8 = modes.quantize(w, "float8_e4m3fn")
    assert q8.dtype == E4M3 and s8.shape == (1, 5) and np.all(s8 == np.abs(w).max() / 448)
    stacked = np.stack([w, 2 * w])
    _, ss = modes.quantize(stacked, "float8_e4m3fn", per_tensor_axes=(0,))
    assert ss.shape == (2, 1, 5) and ss[1, 0, 0] == 2 * ss[0, 0, 0]


COG_BLOCK_LINEAR = re.compile(r"transformer_blocks\.\d+\.(attn1\.(to_[qkv]|to_out\.0)|ff\.net\.(0\.proj|2))\.weight")


@pytest.mark.parametrize("mode", ["lightx2v-int8", "at-load-float8_e4m3fn"])
def test_second_family_cogvideox(mode, tmp_path):
    """CogVideoX-2B (tiny): a LightX2V int8 file against diffusers with the dequantised weights, and at-load fp8
    against diffusers with the round-tripped weights; the AdaLN projections inside its blocks stay full precision."""
    from vidax_cogvideox.convert_dit import DIT_RULES as COG_RULES
    from vidax_cogvideox.dit import CogVideoXDiT, CogVideoXDiTConfig
    from vidax_core.testing.tiny.cogvideox import dit_kwargs, random_cogvideox_dit

    model_t = random_cogvideox_dit("2b", seed=1)
    tensors = {k: v.detach().numpy() for k, v in model_t.state_dict().items()}
    out, deq = dict(tensors), {}
    for k, w in tensors.items():
        if COG_BLOCK_LINEAR.fullmatch(k):
            if mode == "lightx2v-int8":
                q, s = _rows(w, 127.0, np.int8)
                out[k], out[k[:-7] + ".weight_scale"] = q, s
                deq[k] = q.astype(np.float32) * s
            else:
                qk, s = modes.quantize(w.T, "float8_e4m3fn")
                deq[k] = modes.dequantize(qk, s).T
    path = str(tmp_path / "dit.safetensors")
    save_file(out, path)
    source = TensorSource([path])
    lay = read_layout(source)
    want_mode = "int8" if mode == "lightx2v-int8" else "float8_e4m3fn"
    assert lay.mode == (want_mode if mode == "lightx2v-int8" else None)
    cfg = CogVideoXDiTConfig.from_config(dit_kwargs("2b"))
    build = policy.apply(DitBuild.of(CogVideoXDiT, cfg, in_channels=cfg.in_channels), want_mode, DEFAULT_KEEP)
    graphdef, state, flat = abstract_model(build.ctor)
    assert ("blocks", "attn1", "to_q", "kernel_scale") in flat
    assert ("blocks", "norm1", "linear", "kernel_scale") not in flat  # AdaLN modulation: full precision
    model = materialize(graphdef, state, convert(policy.tensors_for_load(source, "tiny"), COG_RULES, flat))
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 3, cfg.in_channels, 4, 4)).astype(np.float32)
    context = (rng.standard_normal((2, 12, cfg.text_embed_dim)) * 3).astype(np.float32)
    t = np.array([999.0, 250.0], np.float32)
    got = np.asarray(jax.jit(lambda m, *a: m(*a))(model, jnp.asarray(latents), jnp.asarray(t), jnp.asarray(context)))
    saved = {k: v.clone() for k, v in model_t.state_dict().items()}
    model_t.load_state_dict({**saved, **{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in deq.items()}})
    with torch.no_grad():
        want = model_t(hidden_states=torch.from_numpy(latents), encoder_hidden_states=torch.from_numpy(context),
                       timestep=torch.from_numpy(t), return_dict=False)[0].numpy()
    rel = _rel(got, want)
    print(f"cogvideox {mode}: rel {rel:.2e}")
    assert rel <= 1e-4, rel


def test_layout_reads_no_lazy_tensor():
    """Recognising the layout reads headers only: a source of lazy loaders (HunyuanVideo's original .pt view) is
    never called, and is taken as holding no 8-bit weights."""
    def boom():
        raise AssertionError("read a tensor")

    lay = read_layout({"blocks.0.attn1.to_q.weight": boom, "proj_out.weight": boom})
    assert lay.name is None and lay.mode is None


def test_quantized_value_reads_as_its_dequantised_array():
    """A family transform that reads a scaled weight as an array (HunyuanVideo splits its fused proj_out before the
    key table) sees ``w.float() * scale``."""
    from vidax_core.quant.source import Quantized

    q = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    for scale in (np.array([[0.5], [1.0], [2.0]], np.float32), np.array([0.5, 1.0, 2.0], np.float32),
                  np.array(0.25, np.float32)):
        want = q.astype(np.float32) * (scale.reshape(3, 1) if scale.size > 1 else scale)
        np.testing.assert_array_equal(np.asarray(Quantized(lambda: q, scale)), want)
        np.testing.assert_array_equal(np.asarray(Quantized(q, scale))[:, :2], want[:, :2])


HY_BLOCK_LINEAR = re.compile(r"(single_)?transformer_blocks\.\d+\..*(?<!norm1\.linear)(?<!norm1_context\.linear)"
                             r"(?<!norm\.linear)\.weight")


def test_third_family_hunyuan_scaled_fp8():
    """HunyuanVideo (tiny): a ComfyUI scaled_fp8 file of every block matrix, its fused single-block ``proj_out``
    split by the family before the key table, against diffusers with the dequantised weights."""
    from vidax_hunyuan.convert_dit import convert_dit
    from vidax_hunyuan.dit import HunyuanDiT

    pytest.importorskip("vidax_hunyuan")
    import importlib.util
    import os
    import sys

    here = os.path.join(os.path.dirname(importlib.util.find_spec("vidax_hunyuan").origin), "..", "..", "tests")
    sys.path.insert(0, os.path.abspath(here))
    try:
        from test_hunyuan_dit import make_inputs, make_reference, run_reference
    finally:
        sys.path.pop(0)
    model_t, tensors, cfg = make_reference()
    out, deq = dict(tensors), {}
    for k, w in tensors.items():
        if w.ndim == 2 and HY_BLOCK_LINEAR.fullmatch(k):
            q, s = _fp8_tensor(w)
            out[k], out[k[:-7] + ".scale_weight"] = q, np.asarray(s, np.float32)
            deq[k] = q.astype(np.float32) * s
    out["scaled_fp8"] = np.zeros(2, E4M3)
    assert any("proj_out" in k for k in deq) and any("norm1.linear" in k for k in tensors)
    tensors_q = policy.tensors_for_load(out, "tiny")
    build = policy.apply(DitBuild.of(HunyuanDiT, cfg, in_channels=4), "float8_e4m3fn", DEFAULT_KEEP)
    graphdef, state, flat = abstract_model(build.ctor)
    assert ("single_blocks", "out_attn", "kernel_scale") in flat
    model = materialize(graphdef, state, convert_dit(tensors_q, flat))
    inputs = make_inputs()
    inputs = inputs[:5] + (np.array([1.0, 3.0], np.float32),)
    latents, timestep, hidden, mask, pooled, guidance = inputs
    ctx = {"hidden": jnp.asarray(hidden), "mask": jnp.asarray(mask), "pooled": jnp.asarray(pooled)}
    got = np.asarray(jax.jit(lambda m, *a: m(*a))(model, jnp.asarray(latents), jnp.asarray(timestep), ctx,
                                                    jnp.asarray(guidance)))
    saved = {k: v.clone() for k, v in model_t.state_dict().items()}
    model_t.load_state_dict({**saved, **{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in deq.items()}})
    try:
        want = run_reference(model_t, inputs)
    finally:
        model_t.load_state_dict(saved)
    rel = _rel(got, want)
    print(f"hunyuan scaled_fp8: rel {rel:.2e}")
    assert rel <= 1e-4, rel


def test_lora_on_an_8bit_base_requantizes_with_fresh_scales(reference, tmp_path):
    """A LoRA fused over an int8 file (the load's order: scales folded in, then the adapter) reads the weight
    dequantised, adds the delta, and the conversion quantizes the sum with fresh scales (never the file's)."""
    pytest.importorskip("peft")
    from vidax_core.testing.lora import random_lora, save_adapter, vidax_fused

    _, tensors = reference
    out, _, _ = write_layout("lightx2v-int8", tensors)
    path = str(tmp_path / "dit.safetensors")
    save_file(out, path)
    base = policy.tensors_for_load(TensorSource([path]), "tiny")
    adapter = save_adapter(tmp_path / "a.safetensors", random_lora(tensors, include=r"blocks\.0\.attn1\.to_q"))
    fused = vidax_fused(base, [(adapter, 1.0)], None)
    key = "blocks.0.attn1.to_q.weight"
    old = out[key].astype(np.float32) * out["blocks.0.attn1.to_q.weight_scale"]
    assert not np.allclose(fused[key], old)  # the delta is there
    cfg = WanDiTConfig.from_config(TINY_DIT_CONFIG)
    build = policy.apply(DitBuild.of(WanDiT, cfg, in_channels=4), "int8", DEFAULT_KEEP)
    _, _, flat = abstract_model(build.ctor)
    values = convert(fused, DIT_RULES, flat, ignore=DIT_IGNORE)
    q_new, s_new = modes.quantize(fused[key].T, "int8")
    np.testing.assert_array_equal(values[("blocks", "attn1", "to_q", "kernel_scale")][0], s_new)
    np.testing.assert_array_equal(values[("blocks", "attn1", "to_q", "kernel")][0], q_new)
    assert not np.array_equal(s_new, out["blocks.0.attn1.to_q.weight_scale"].T)


class _Ckpt:
    """The one component a denoiser build reads, as a run's checkpoint serves it."""

    source = "tiny"

    def __init__(self, path: str) -> None:
        self.path = path

    def read_tensors(self, component):
        return TensorSource([self.path])

    def config(self, component):
        return dict(TINY_DIT_CONFIG)


def _policy_model(path, weight_dtype=None, outside=False):
    """The tiny Wan DiT as a run builds it: the run's 8-bit policy (quant.policy.builds_for_run), then loaded."""
    from types import SimpleNamespace

    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    spec = plugins.registry.get("wan2.1-t2v-1.3b")
    run = SimpleNamespace(model=SimpleNamespace(weight_dtype=weight_dtype, quantize_outside_blocks=outside))
    ckpt = _Ckpt(path)
    base = DitBuild.of(WanDiT, WanDiTConfig.from_config(TINY_DIT_CONFIG), in_channels=4)
    build = policy.builds_for_run([base], spec, ckpt, run, plugins)[0]
    tensors = policy.tensors_for_load(ckpt.read_tensors("transformer"), "tiny")
    graphdef, state, flat = abstract_model(build.ctor)
    return materialize(graphdef, state, convert(tensors, DIT_RULES, flat, ignore=DIT_IGNORE))


EMBEDDERS = ("time_linear_1", "time_linear_2", "time_proj", "text_linear_1", "text_linear_2")


def test_a_files_bf16_embedders_stay_as_stored(reference, inputs, tmp_path):
    """Plain fp8 blocks beside bf16 embedders (the published fp8 14B's layout): the blocks stay the file's fp8,
    the embedders stay bf16 values (no second rounding), and the run equals diffusers given the file's weights
    read as they are (``w.float()``)."""
    model_t, tensors = reference
    out, deq = {}, {}
    for k, w in tensors.items():
        if BLOCK_LINEAR.fullmatch(k):
            out[k] = w.astype(E4M3)
        elif OUTSIDE_LINEAR.fullmatch(k):
            out[k] = w.astype(ml_dtypes.bfloat16)
        else:
            out[k] = w
        deq[k] = out[k].astype(np.float32)
    path = str(tmp_path / "dit.safetensors")
    save_file(out, path)
    model = _policy_model(path)
    assert np.dtype(model.blocks.attn1.to_q.kernel[...].dtype) == _held(np.dtype(E4M3))
    for name in EMBEDDERS:
        lin = getattr(model, name)
        assert lin.kernel_scale is None and np.dtype(lin.kernel[...].dtype) == np.float32, name
    got = np.asarray(_FWD(model, *map(jnp.asarray, inputs)))
    rel = _rel(got, _want(model_t, deq, inputs))
    print(f"plain fp8 blocks, bf16 embedders as stored: rel {rel:.2e}")
    assert rel <= 1e-4


@pytest.mark.parametrize("layout, stored", [("scaled_fp8", True), ("lightx2v-fp8", False)])
def test_layers_outside_the_blocks_stay_as_the_file_stores_them(layout, stored, reference, tmp_path):
    """docs/quantization.md: a run keeps the embedders and the head as the file stores them, ComfyUI's 8-bit ones
    8-bit (the file's own values) and LightX2V's full-precision ones in full precision (the run's policy,
    ``quant.policy.builds_for_run``, without ``model.quantize_outside_blocks``)."""
    doc = " ".join((ROOT / "docs" / "quantization.md").read_text(encoding="utf-8").split())
    assert "So a layer outside the blocks stays as the file stores it" in doc
    _, tensors = reference
    out, meta, _ = write_layout(layout, tensors)
    path = str(tmp_path / "dit.safetensors")
    save_file(out, path, metadata=meta)
    model = _policy_model(path)
    for name, key in (("time_proj", "condition_embedder.time_proj.weight"), ("proj_out", "proj_out.weight")):
        lin = getattr(model, name)
        assert (lin.kernel_scale is not None) == stored, name
        if stored:  # the file's own 8-bit values
            np.testing.assert_array_equal(np.asarray(lin.kernel[...]).view(np.uint8), out[key].T.view(np.uint8))


@pytest.mark.parametrize("outside", [False, True])
def test_at_load_fp8_covers_the_blocks_unless_asked(outside, reference, inputs, tmp_path):
    """``model.weight_dtype=float8_e4m3fn`` on a float32 checkpoint: the block Linear weights round-trip through
    the documented per-tensor scaling (absmax / 448), everything outside the blocks stays full precision, unless
    ``model.quantize_outside_blocks`` adds Wan's embedders (then they round-trip the same way)."""
    model_t, tensors = reference
    path = str(tmp_path / "dit.safetensors")
    save_file(tensors, path)
    model = _policy_model(path, "float8_e4m3fn", outside)
    deq = {}
    for k, w in tensors.items():
        if BLOCK_LINEAR.fullmatch(k) or (outside and OUTSIDE_LINEAR.fullmatch(k)):
            q, s = _fp8_tensor(w)  # the test's own round trip, not vidax's quantizer
            deq[k] = q.astype(np.float32) * s
    for name in EMBEDDERS:
        assert (getattr(model, name).kernel_scale is not None) == outside, name
    got = np.asarray(_FWD(model, *map(jnp.asarray, inputs)))
    rel = _rel(got, _want(model_t, deq, inputs))
    print(f"at-load fp8 (outside the blocks too: {outside}): rel {rel:.2e}")
    assert rel <= 1e-4
