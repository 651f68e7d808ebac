"""The core decoder LLM as Gemma-4 unified's text tower (LTX-2.5's prompt encoder) against transformers'
``Gemma4UnifiedForConditionalGeneration`` on a tiny random model (CPU): mixed sliding / full layers, full layers
with their own head size, one KV head and values from the key projection, proportional RoPE, value norm and
per-layer scalars. Every hidden state in fp32 with left and right padding against the float64 reference; leaving
out a Gemma-4 detail moves the result past the bound; the configs transformers and the release write read alike.
Also, on six layers: two KV-shared layers (``num_kv_shared_layers``: no k/v weights, the keys and values of the
last earlier layer of their type) with the double-wide MLP, and ``Gemma4ForConditionalGeneration``'s per-layer
inputs (``hidden_size_per_layer_input``) with the same sharing."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from vidax_core.encoders import decoder_llm as dl
from vidax_core.errors import UserError
from vidax_core.testing.parity import assert_fp32_parity, fp32_bound, fp32_error, max_abs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB, SEQ = 96, 12
TEXT = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, global_head_dim=16, num_global_key_value_heads=1,
            attention_k_eq_v=True, sliding_window=4, max_position_embeddings=128,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                "rope_theta": 1000000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


#: Six layers whose last two reuse keys and values (layers 2 and 3 store them), the sharing variants' base.
SHARED = dict(TEXT, num_hidden_layers=6, layer_types=["sliding_attention", "full_attention"] * 3,
              num_kv_shared_layers=2)
VARIANTS = {"base": ("unified", TEXT),
            "kv_shared": ("unified", dict(SHARED, use_double_wide_mlp=True)),
            "per_layer_inputs": ("gemma4", dict(SHARED, hidden_size_per_layer_input=8,
                                                vocab_size_per_layer_input=VOCAB))}


@functools.cache
def _build(variant: str = "base"):
    """(composite config dict, torch model fp32, state dict as numpy); parameters and layer scalars random."""
    kind, text = VARIANTS[variant]
    if kind == "unified":
        from transformers.models.gemma4_unified import configuration_gemma4_unified as c
        from transformers.models.gemma4_unified.modeling_gemma4_unified import (
            Gemma4UnifiedForConditionalGeneration as Model)

        cfg = c.Gemma4UnifiedConfig(text_config=c.Gemma4UnifiedTextConfig(**text), vision_config=None,
                                    audio_config=None)
    else:
        from transformers.models.gemma4 import configuration_gemma4 as c
        from transformers.models.gemma4.modeling_gemma4 import Gemma4ForConditionalGeneration as Model

        cfg = c.Gemma4Config(text_config=c.Gemma4TextConfig(**text), vision_config=None, audio_config=None)
    torch.manual_seed(0)
    model = Model(cfg).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "embed" in name else 0.15)
            if "norm" in name:  # x * w: gains near 1
                p.add_(1.0)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.uniform_(0.5, 1.5)
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return cfg.to_dict(), model, sd


def _batch(side: str):
    rng = np.random.default_rng(1)
    seqs = [rng.integers(1, VOCAB, size=n).tolist() for n in (SEQ, 7)]
    return dl.pad_batch(seqs, pad_id=0, length=SEQ, side=side)


def _torch_hidden(model, ids, mask, dtype):
    with torch.no_grad():
        out = model.to(dtype)(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long(),
                              output_hidden_states=True)
    model.to(torch.float32)
    return np.stack([h.double().numpy() for h in out.hidden_states])


def _valid(h, mask):
    return h[:, mask.astype(bool)]


def _vidax(cfg, weights, ids, mask):
    return _valid(np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, weights), ids, mask)), mask)


def test_config_reads_the_gemma4_layout():
    cfg_dict, _, _ = _build()
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    assert not cfg.gemma_norm and cfg.sandwich_norms and cfg.qk_norm and cfg.value_norm and cfg.layer_scalar
    assert cfg.query_pre_attn_scalar == 1.0 and cfg.k_eq_v_types == (dl.FULL,)
    assert (cfg.head_dim_of(dl.FULL), cfg.kv_heads(dl.FULL), cfg.head_dim_of(dl.SLIDING), cfg.kv_heads(dl.SLIDING)) == (
        16, 1, 8, 2)
    assert cfg.rope_spec(dl.FULL).rope_type == "proportional" and cfg.rope_spec(dl.FULL).rot_dim(16) == 16
    assert len(cfg.kinds) == 2
    # the released config.json spells the full layers' sizes as global_head_dim / num_global_key_value_heads
    released = dict(cfg_dict["text_config"], global_head_dim=16, num_global_key_value_heads=1)
    released.pop("per_layer_config")
    assert dl.DecoderLLMConfig.from_config(dict(cfg_dict, text_config=released)) == cfg
    for bad in (dict(use_bidirectional_attention="all"), dict(enable_moe_block=True)):
        with pytest.raises(UserError, match="Gemma-4"):
            dl.DecoderLLMConfig.from_config(dict(cfg_dict, text_config=dict(cfg_dict["text_config"], **bad)))
    with pytest.raises(UserError, match="num_kv_shared_layers=4 must be below num_hidden_layers=4"):
        dl.DecoderLLMConfig.from_config(dict(cfg_dict,
                                             text_config=dict(cfg_dict["text_config"], num_kv_shared_layers=4)))


def test_config_reads_kv_sharing_and_per_layer_inputs():
    """Layers 4 and 5 reuse what layers 2 (sliding) and 3 (full) store; they form their own kinds (no k/v weights,
    the double-wide MLP); ``gemma4`` reads the per-layer inputs, ``gemma4_unified`` (which has none) ignores them."""
    shared = dl.DecoderLLMConfig.from_config(_build("kv_shared")[0])
    assert [shared.kv_mode(i) for i in range(6)] == [None, None, "store", "store", "reuse", "reuse"]
    assert [k[4:] for k in shared.kinds] == [(False, 48), (False, 48), (True, 96), (True, 96)]
    ple = dl.DecoderLLMConfig.from_config(_build("per_layer_inputs")[0])
    assert (ple.hidden_size_per_layer_input, ple.vocab_size_per_layer_input, ple.kv_shared_layers) == (8, VOCAB, 2)
    unified = dict(_build("kv_shared")[0], text_config=dict(_build("kv_shared")[0]["text_config"],
                                                            hidden_size_per_layer_input=8))
    assert dl.DecoderLLMConfig.from_config(unified).hidden_size_per_layer_input == 0
    _, _, sd = _build("kv_shared")
    assert not any(k.startswith("model.language_model.layers.4.self_attn.k_") for k in sd)  # shipped without k/v


@pytest.mark.parametrize("variant, side", [("base", "left"), ("base", "right"), ("kv_shared", "left"),
                                           ("per_layer_inputs", "right")])
def test_every_hidden_state_matches_transformers_fp32(variant, side):
    cfg_dict, model, sd = _build(variant)
    ids, mask = _batch(side)
    want64 = _valid(_torch_hidden(model, ids, mask, torch.float64), mask)
    want32 = _valid(_torch_hidden(model, ids, mask, torch.float32), mask)
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    got = _vidax(cfg, sd, ids, mask)
    assert got.shape == want64.shape == (cfg.num_hidden_layers + 1, int(mask.sum()), 32)
    assert_fp32_parity(f"gemma4 {variant} {side}-padded", got, want32, want64,
                       vidax_err=fp32_error(lambda w: _vidax(cfg, w, ids, mask), sd, base=got))


def test_leaving_out_a_gemma4_detail_moves_past_the_bound():
    cfg_dict, model, sd = _build()
    ids, mask = _batch("left")
    want64 = _valid(_torch_hidden(model, ids, mask, torch.float64), mask)
    want32 = _valid(_torch_hidden(model, ids, mask, torch.float32), mask)
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    got = _vidax(cfg, sd, ids, mask)
    bound = fp32_bound(want32, want64, fp32_error(lambda w: _vidax(cfg, w, ids, mask), sd, base=got))
    partial = dataclasses.replace(cfg.rope_spec(dl.FULL), rope_type="default")  # rotate a quarter, NeoX-style
    wrong = {
        "no value norm": (dataclasses.replace(cfg, value_norm=False), sd),
        "no layer scalar": (cfg, {k: (np.ones_like(v) if k.endswith("layer_scalar") else v) for k, v in sd.items()}),
        "partial instead of proportional RoPE": (
            dataclasses.replace(cfg, rope=((dl.FULL, partial), (dl.SLIDING, cfg.rope_spec(dl.SLIDING)))), sd),
        "Gemma-3 (1 + w) norms": (dataclasses.replace(cfg, gemma_norm=True), sd),
    }
    for label, (c, w) in wrong.items():
        err = max_abs(_vidax(c, w, ids, mask), want64)
        print(f"{label}: max abs {err:.3e} vs bound {bound:.3e}")
        assert err > 10 * bound, label
