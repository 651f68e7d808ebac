"""Cosmos3 run checks before any weight loads: tensor/sequence-parallel head divisibility (query AND key/value heads)
and the refusal of ModelOpt FP8 transformer weights, on a tiny safetensors file written by the safetensors library
itself (``F8_E4M3`` weights with float32 ``weight_scale`` / ``input_scale`` beside them, as ModelOpt's HF export
stores them)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from vidax_core.errors import UserError
from vidax_core.io.safetensors import SafetensorsFile
from vidax_cosmos.cosmos3_dit import Cosmos3DiTConfig
from vidax_cosmos.cosmos3_fp8 import BF16_REVISION, check_not_fp8, fp8_signs
from vidax_cosmos.cosmos3_parallel import check_config, check_heads


@pytest.mark.parametrize("heads,kv,tp,sp", [(32, 8, 1, 1), (32, 8, 8, 1), (32, 8, 4, 8), (32, 8, 2, 4),
                                            (16, 8, 8, 2), (16, 8, 2, 8)])
def test_heads_that_split(heads, kv, tp, sp):
    check_heads(heads, kv, tp=tp, sp=sp)


@pytest.mark.parametrize("heads,kv,tp,sp,words", [
    (32, 8, 16, 1, "8 key/value heads"),      # the query heads split 16 ways, the KV heads do not
    (16, 8, 16, 1, "8 key/value heads"),
    (32, 8, 3, 1, "32 attention (query) heads"),
    (32, 8, 8, 8, "parallel.sp=8"),           # 4 heads per shard do not split 8 ways
    (16, 8, 4, 8, "parallel.sp=8"),
])
def test_heads_that_do_not_split(heads, kv, tp, sp, words):
    with pytest.raises(UserError) as e:
        check_heads(heads, kv, tp=tp, sp=sp)
    msg = str(e.value)
    assert words in msg and ("change parallel.tp" in msg or "change parallel.sp" in msg)


def test_config_check_reads_both_head_counts():
    nano = Cosmos3DiTConfig()  # the defaults are Nano's: 32 query / 8 KV heads
    check_config(nano, tp=8)
    with pytest.raises(UserError, match="key/value heads"):
        check_config(nano, tp=16)


def _header_dtypes(path) -> dict[str, str]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in head.items() if k != "__metadata__"}


def _write(path, fp8: bool):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    w = torch.randn(8, 4)
    t = {"layers.0.self_attn.add_q_proj.weight": w.to(torch.float8_e4m3fn if fp8 else torch.bfloat16),
         "layers.0.input_layernorm_moe_gen.weight": torch.ones(4, dtype=torch.bfloat16),
         "proj_in.bias": torch.zeros(8, dtype=torch.bfloat16)}
    if fp8:
        t["layers.0.self_attn.add_q_proj.weight_scale"] = torch.tensor(0.02, dtype=torch.float32)
        t["layers.0.self_attn.add_q_proj.input_scale"] = torch.tensor(0.5, dtype=torch.float32)
    save_file(t, str(path))
    return SafetensorsFile(str(path))


def test_fp8_weights_are_refused_naming_the_bf16_revision(tmp_path):
    tensors = _write(tmp_path / "diffusion_pytorch_model.safetensors", fp8=True)
    assert _header_dtypes(tmp_path / "diffusion_pytorch_model.safetensors")[
        "layers.0.self_attn.add_q_proj.weight"] == "F8_E4M3"
    with pytest.raises(UserError) as e:
        check_not_fp8(tensors, {}, folder=str(tmp_path), repo="nvidia/Cosmos3-Nano")
    msg = str(e.value)
    assert "ModelOpt FP8" in msg and f"revision {BF16_REVISION!r}" in msg and "nvidia/Cosmos3-Nano" in msg
    assert "1 float8 tensors" in msg and "2 quantization scale tensors" in msg
    assert "\n" not in msg


def test_bf16_weights_pass(tmp_path):
    tensors = _write(tmp_path / "diffusion_pytorch_model.safetensors", fp8=False)
    assert fp8_signs(tensors, {"hidden_size": 4}, str(tmp_path)) == []
    check_not_fp8(tensors, {"hidden_size": 4}, folder=str(tmp_path))


def test_quantization_config_or_modelopt_files_alone_are_refused(tmp_path):
    tensors = _write(tmp_path / "diffusion_pytorch_model.safetensors", fp8=False)
    with pytest.raises(UserError, match="quant_method=modelopt"):
        check_not_fp8(tensors, {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}})
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    with pytest.raises(UserError, match="hf_quant_config.json"):
        check_not_fp8(tensors, {}, folder=str(tmp_path))


def test_numpy_fp8_arrays_are_seen_too():
    import ml_dtypes

    tensors = {"layers.0.mlp.up_proj.weight": np.zeros((4, 4), ml_dtypes.float8_e4m3fn)}
    assert fp8_signs(tensors) == ["1 float8 tensors (e.g. layers.0.mlp.up_proj.weight)"]


def test_config_from_a_hub_style_config_json():
    """A transformer config.json as published (class name, backbone tag, storage dtype, sound/action keys): the
    fields vidax uses are read, the storage dtype does not become the parameter dtype, the mRoPE sections come
    from rope_scaling, and a bad section split is one UserError."""
    import jax.numpy as jnp

    edge = {"_class_name": "Cosmos3OmniTransformer", "backbone_type": "cosmos3_edge_nemotron_dense",
            "dtype": "bfloat16", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 8,
            "num_hidden_layers": 28, "intermediate_size": 9216, "hidden_act": "relu2", "qk_norm_for_text": False,
            "use_und_k_norm_for_gen": True, "rope_scaling": {"mrope_section": [24, 20, 20]}, "action_gen": True,
            "action_dim": 64, "sound_gen": False, "sound_dim": None, "base_fps": 24, "vocab_size": 131072}
    cfg = Cosmos3DiTConfig.from_config(edge)
    assert cfg.dtype == jnp.float32 and cfg.rope_axes_dim == (24, 20, 20) and cfg.has_k_norm_und_for_gen
    assert Cosmos3DiTConfig.from_config(edge, dtype=jnp.bfloat16).dtype == jnp.bfloat16
    with pytest.raises(UserError, match="rope_axes_dim"):
        Cosmos3DiTConfig.from_config({**edge, "rope_scaling": {"mrope_section": [24, 20, 24]}})
    with pytest.raises(UserError, match="hidden_act"):
        Cosmos3DiTConfig.from_config({**edge, "hidden_act": "gelu"})


@pytest.mark.parametrize("act", ["silu", "relu2"])
def test_every_parameter_has_logical_axes(act):
    """Every parameter names each of its axes (stacked blocks lead with ``layers``); the key/value projections are
    split over ``heads`` like the queries (which is why TP must divide the key/value heads)."""
    from flax import nnx

    from vidax_core.nn.state import abstract_model
    from vidax_core.parallel.sharding import param_names
    from vidax_cosmos.cosmos3_dit import Cosmos3DiT

    cfg = Cosmos3DiTConfig(hidden_size=32, head_dim=8, num_attention_heads=4, num_key_value_heads=2,
                           num_hidden_layers=2, intermediate_size=40, vocab_size=16, latent_channel=4,
                           patch_latent_dim=16, rope_axes_dim=(2, 1, 1), hidden_act=act, qk_norm_for_text=act == "silu",
                           use_und_k_norm_for_gen=act == "relu2")
    _, state, flat = abstract_model(lambda: Cosmos3DiT(cfg, rngs=nnx.Rngs(0)))
    names = param_names(state)
    assert set(names) == set(flat)
    for path, n in names.items():
        assert n is not None and len(n) == len(flat[path].shape), path
        assert (n[0] == "layers") == (path[0] == "blocks"), path
    for proj in ("to_k", "to_v", "add_k_proj", "add_v_proj"):
        assert names[("blocks", "self_attn", proj, "kernel")] == ("layers", "embed", "heads")
    assert names[("embed_tokens",)] == ("vocab", "embed")
