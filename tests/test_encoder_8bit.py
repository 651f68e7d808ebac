"""8-bit prompt encoder files load as stored (vidax_core.quant.stored): a ComfyUI ``scaled_fp8`` UMT5 and a plain or
scaled fp8 Qwen2.5-VL text tower keep their Linear kernels 8-bit with their scales, resident and streamed, and
compute what the same weights dequantised to float32 first compute; the memory plan sizes them at their stored
bytes, which is what the placed arrays hold."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.policy import EncoderPolicy, encoder_policy
from vidax_core.encoders.t5 import T5Config, call_encoder, load_t5
from vidax_core.io.checkpoint import TensorSource
from vidax_core.io.component_files import strip_wrapper
from vidax_core.io.safetensors import save_file
from vidax_core.nn.state import flat_state
from vidax_core.parallel import streamed
from vidax_core.quant.source import QuantizedTensors

FP8 = ml_dtypes.float8_e4m3fn
D, FF, LAYERS = 128, 256, 2  # widths of at least 128: a per-output-channel fp32 scale adds at most 1/32
UMT5 = dict(vocab_size=64, d_model=D, d_kv=32, d_ff=FF, num_layers=LAYERS, num_heads=4, model_type="umt5",
            relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj="gated-gelu")
QWEN = {"model_type": "qwen2_5_vl_text", "vocab_size": 64, "hidden_size": D, "intermediate_size": FF,
        "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 10000.0}


def _umt5_weights(rng):
    sd = {"shared.weight": rng.normal(0, 0.5, (64, D)), "encoder.final_layer_norm.weight": 1 + 0.1 * rng.normal(size=D)}
    for i in range(LAYERS):
        b = f"encoder.block.{i}.layer."
        for n in "qkvo":
            sd[b + f"0.SelfAttention.{n}.weight"] = rng.normal(0, 0.05, (D, D))
        sd[b + "0.SelfAttention.relative_attention_bias.weight"] = rng.normal(0, 0.5, (8, 4))
        sd[b + "0.layer_norm.weight"] = sd[b + "1.layer_norm.weight"] = 1 + 0.1 * rng.normal(size=D)
        sd[b + "1.DenseReluDense.wi_0.weight"] = rng.normal(0, 0.05, (FF, D))
        sd[b + "1.DenseReluDense.wi_1.weight"] = rng.normal(0, 0.05, (FF, D))
        sd[b + "1.DenseReluDense.wo.weight"] = rng.normal(0, 0.05, (D, FF))
    return {k: np.asarray(v, np.float32) for k, v in sd.items()}


def _qwen_weights(rng):
    kv = 2 * 32
    sd = {"model.embed_tokens.weight": rng.normal(0, 0.5, (64, D)), "model.norm.weight": 1 + 0.1 * rng.normal(size=D)}
    for i in range(LAYERS):
        b = f"model.layers.{i}."
        for n, out in (("q", D), ("k", kv), ("v", kv)):
            sd[b + f"self_attn.{n}_proj.weight"] = rng.normal(0, 0.05, (out, D))
            sd[b + f"self_attn.{n}_proj.bias"] = rng.normal(0, 0.05, (out,))
        sd[b + "self_attn.o_proj.weight"] = rng.normal(0, 0.05, (D, D))
        sd[b + "mlp.gate_proj.weight"] = rng.normal(0, 0.05, (FF, D))
        sd[b + "mlp.up_proj.weight"] = rng.normal(0, 0.05, (FF, D))
        sd[b + "mlp.down_proj.weight"] = rng.normal(0, 0.05, (D, FF))
        sd[b + "input_layernorm.weight"] = sd[b + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.normal(size=D)
    return {k: np.asarray(v, np.float32) for k, v in sd.items()}


def _is_linear(key: str, v: np.ndarray) -> bool:
    return v.ndim == 2 and (".block." in key or ".layers." in key) and "relative_attention_bias" not in key


def _files(sd, folder, scaled: bool):
    """(the 8-bit file, the float32 file of the same weights dequantised): ComfyUI ``scaled_fp8`` (per-tensor
    ``scale_weight`` and the marker; the embedding kept fp16 as ComfyUI keeps it) or a plain fp8 cast."""
    q8, deq = {}, {}
    for k, v in sd.items():
        if _is_linear(k, v):
            scale = np.float32(np.abs(v).max() / 448.0) if scaled else np.float32(1.0)
            q = (v / scale).astype(FP8)
            q8[k], deq[k] = q, q.astype(np.float32) * scale
            if scaled:
                q8[k[:-len("weight")] + "scale_weight"] = np.array([scale], np.float32)
        elif "embed" in k or "shared" in k:
            q8[k] = v.astype(np.float16)
            deq[k] = q8[k].astype(np.float32)
        else:
            q8[k] = deq[k] = v
    if scaled:
        q8["scaled_fp8"] = np.zeros(0, FP8)
    paths = str(folder / "fp8.safetensors"), str(folder / "f32.safetensors")
    save_file(q8, paths[0])
    save_file(deq, paths[1])
    return paths


def _source(path):
    """The file as a ComfyUI encoder file reads (vidax_core.io.component_files): its scales beside their weights."""
    return QuantizedTensors(strip_wrapper(TensorSource([path])))


def _stored_bytes(path, layer: str = "") -> int:
    """Bytes of the file's 8-bit Linear weights and their scales (those of one layer, ``layer`` = ``block.0.``)."""
    src = TensorSource([path])
    return sum(src.nbytes(k) for k in src if layer in k and (np.dtype(src.dtype(k)) == np.dtype(FP8)
                                                               or k.endswith(".scale_weight")))


def _kernel_bytes(model) -> int:
    """Bytes of the Linear kernels and their scales the model holds (its placed arrays)."""
    return sum(int(a.nbytes) for p, a in flat_state(model).items() if p[-1] in ("kernel", "kernel_scale"))


@pytest.fixture(scope="module")
def umt5(tmp_path_factory):
    return _files(_umt5_weights(np.random.default_rng(0)), tmp_path_factory.mktemp("umt5"), scaled=True)


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(1).integers(0, 64, (2, 9)).astype(np.int32)


def test_a_scaled_fp8_umt5_keeps_its_kernels_8bit_and_matches_its_dequantised_weights(umt5, ids):
    fp8, f32 = umt5
    cfg = T5Config.from_config(UMT5)
    model = load_t5(cfg, _source(fp8))
    want = np.asarray(call_encoder(load_t5(cfg, TensorSource([f32])), ids))
    flat = flat_state(model)
    kernels = {p: a for p, a in flat.items() if p[-1] == "kernel"}
    assert len(kernels) == 7 and all(np.dtype(a.dtype).itemsize == 1 for a in kernels.values())
    assert all(p[:-1] + ("kernel_scale",) in flat for p in kernels)  # each with its scale...
    scales = np.concatenate([np.ravel(flat[p[:-1] + ("kernel_scale",)]) for p in kernels])
    assert scales.max() < 1e-3  # ...far from 1: an encoder that dropped them would be off by 1000x
    assert flat[("embedding",)].dtype == np.float32 and flat[("blocks", "attn_norm", "scale")].dtype == np.float32
    got = np.asarray(call_encoder(model, ids))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # a scaled file read straight from its folder (no ComfyUI view) folds its scales in the same way
    raw = np.asarray(call_encoder(load_t5(cfg, TensorSource([fp8])), ids))
    np.testing.assert_allclose(raw, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_bf16_run_keeps_the_8bit_kernels_and_computes_in_bf16(umt5, ids):
    fp8, f32 = umt5
    with encoder_policy(EncoderPolicy(dtype=jax.numpy.bfloat16)):
        cfg = T5Config.from_config(UMT5)
        model = load_t5(cfg, _source(fp8))
    flat = flat_state(model)
    assert np.dtype(flat[("blocks", "attn", "q", "kernel")].dtype).itemsize == 1
    assert model.blocks.attn.q.compute_dtype == ml_dtypes.bfloat16 and flat[("embedding",)].dtype == ml_dtypes.bfloat16
    want = np.asarray(call_encoder(load_t5(T5Config.from_config(UMT5), TensorSource([f32])), ids))
    got = np.asarray(call_encoder(model, ids)).astype(np.float32)
    assert np.abs(got - want).max() <= 3e-2 * np.abs(want).max()


def test_resident_and_streamed_umt5_hold_the_files_8bit_bytes(umt5, ids):
    from vidax_core.placement import memory_plan
    from vidax_core.runner.encoders import encoder_dtypes

    fp8, _ = umt5
    cfg = T5Config.from_config(UMT5)
    resident = load_t5(cfg, _source(fp8))
    stored = _stored_bytes(fp8)
    ratio = _kernel_bytes(resident) / stored
    print(f"resident UMT5: 8-bit kernels + scales held / stored in the file = {ratio:.3f}")
    assert 1.0 <= ratio <= 1.05, ratio
    with encoder_policy(EncoderPolicy(stream_layers=1)):
        stream = load_t5(cfg, _source(fp8))
    chunks = streamed._stream_of(stream.blocks).chunks
    chunk = nnx.merge(nnx.graphdef(stream.blocks), chunks.put(0))  # the arrays one streamed chunk holds
    ratio = _kernel_bytes(chunk) / _stored_bytes(fp8, "block.0.")
    print(f"streamed UMT5 chunk: held / stored = {ratio:.3f}")
    assert 1.0 <= ratio <= 1.05, ratio
    np.testing.assert_allclose(np.asarray(call_encoder(stream, ids)), np.asarray(call_encoder(resident, ids)),
                               rtol=1e-5, atol=1e-6)

    class Ckpt:  # the plan reads what a ComfyUI folder's checkpoint gives: the file's headers, the scales folded
        def has(self, c):
            return c == "text_encoder"

        def read_tensors(self, c):
            return _source(fp8)

        def config(self, c):
            return UMT5

    run = SimpleNamespace(model=SimpleNamespace(dtype="float32"))
    (size,) = memory_plan.encoder_sizes(Ckpt(), None, run)
    held = sum(int(a.nbytes) for a in flat_state(resident).values())
    assert size.weight_dtype == "float8_e4m3fn" and size.eight_bit == _kernel_bytes(resident)
    assert abs(size.total - held) <= 0.01 * held, (size.total, held)  # the plan's figure is what is held
    assert memory_plan.encoder_weights([size], "bfloat16") == "float8_e4m3fn weights, bfloat16 compute"
    assert encoder_dtypes({"encoder": resident}) == {"encoder": "float8_e4m3fn"}  # what the metrics state


@pytest.mark.parametrize("scaled", [False, True], ids=["plain-fp8", "scaled-fp8"])
def test_an_fp8_qwen_text_tower_matches_its_dequantised_weights(scaled, ids, tmp_path):
    fp8, f32 = _files(_qwen_weights(np.random.default_rng(2)), tmp_path, scaled=scaled)
    cfg = dl.DecoderLLMConfig.from_config(QWEN)
    model = dl.load_decoder_llm(cfg, _source(fp8))
    eight = [p for p, a in flat_state(model).items() if p[-1] == "kernel" and np.dtype(a.dtype).itemsize == 1]
    assert len(eight) == 7  # q, k, v, o, gate, up and down of the stacked layers
    ratio = _kernel_bytes(model) / _stored_bytes(fp8)
    assert 1.0 <= ratio <= 1.05, ratio
    mask = np.ones_like(ids)
    mask[0, 6:] = 0
    want = np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, TensorSource([f32])), ids, mask))
    got = np.asarray(dl.hidden_states(model, ids, mask))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_an_8bit_kernel_on_the_host_cpu_beside_an_accelerator_is_held_as_its_bits(monkeypatch):
    """``runtime.encode_on=cpu`` on a TPU host places the encoder under ``jax.default_device(cpu)``: its float8
    kernels are held as uint8 bits there too (the CPU backend upcasts a float8 stack sliced in a scan)."""
    from vidax_core.quant import cpu_bits

    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert cpu_bits.held_dtype(FP8, None) == np.dtype(FP8)
    with jax.default_device(jax.devices("cpu")[0]):
        assert cpu_bits.held_dtype(FP8, None) == np.uint8
