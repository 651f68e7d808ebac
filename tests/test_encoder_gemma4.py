"""The core decoder LLM as Gemma-4 unified's text tower (LTX-2.5's prompt encoder) against transformers'
``Gemma4UnifiedForConditionalGeneration`` on a tiny random model (CPU): mixed sliding / full layers, full layers
with their own head size, one KV head and values from the key projection, proportional RoPE, value norm and
per-layer scalars. Every hidden state in fp32 with left and right padding against the float64 reference; leaving
out a Gemma-4 detail moves the result past the bound; the configs transformers and the release write read alike."""

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


@functools.cache
def _build():
    """(composite config dict, torch model fp32, state dict as numpy); parameters and layer scalars random."""
    from transformers.models.gemma4_unified import configuration_gemma4_unified as c
    from transformers.models.gemma4_unified.modeling_gemma4_unified import Gemma4UnifiedForConditionalGeneration

    cfg = c.Gemma4UnifiedConfig(text_config=c.Gemma4UnifiedTextConfig(**TEXT), vision_config=None, audio_config=None)
    torch.manual_seed(0)
    model = Gemma4UnifiedForConditionalGeneration(cfg).eval().float()
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
    for bad in (dict(num_kv_shared_layers=2), dict(use_bidirectional_attention="all"), dict(enable_moe_block=True)):
        with pytest.raises(UserError, match="Gemma-4"):
            dl.DecoderLLMConfig.from_config(dict(cfg_dict, text_config=dict(cfg_dict["text_config"], **bad)))


@pytest.mark.parametrize("side", ["left", "right"])
def test_every_hidden_state_matches_transformers_fp32(side):
    cfg_dict, model, sd = _build()
    ids, mask = _batch(side)
    want64 = _valid(_torch_hidden(model, ids, mask, torch.float64), mask)
    want32 = _valid(_torch_hidden(model, ids, mask, torch.float32), mask)
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    got = _vidax(cfg, sd, ids, mask)
    assert got.shape == want64.shape == (5, int(mask.sum()), 32)
    assert_fp32_parity(f"gemma4 {side}-padded", got, want32, want64,
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
