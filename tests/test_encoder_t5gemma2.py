"""The core T5Gemma2 encoder (vidax_core.encoders.t5gemma2: the decoder LLM read bidirectionally, and its SigLIP
tower through the core ViT) against transformers' ``T5Gemma2Encoder`` on a tiny random model (CPU).

Text: four layers, sliding (window 4, shorter than the 12-token prompts, so the centred window matters) and full,
one KV head; right-padded prompts, ``last_hidden_state`` at the prompts' tokens in fp32 against the float64
reference (a padded position whose window holds only padding attends to nothing: transformers' SDPA and eager paths
disagree there, and the pipelines mask those positions out as keys, so nothing reads them); one prompt holds the
end-of-image token, whose learned embedding replaces the table's. Leaving out what makes it T5Gemma2
(bidirectional attention, the centred window, the end-of-image embedding) moves the result past the bound.
Vision: the SigLIP tower's ``last_hidden_state``."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders import t5gemma2
from vidax_core.errors import UserError
from vidax_core.testing.parity import assert_fp32_parity, fp32_bound, fp32_error, max_abs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB, SEQ, EOI = 96, 12, 7
TEXT = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=48, vocab_size=VOCAB,
            max_position_embeddings=128, head_dim=16, num_key_value_heads=1, sliding_window=4,
            layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"])
VISION = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2, image_size=28,
              patch_size=14, vision_use_head=False)


@functools.cache
def _build():
    """(config dict, torch T5Gemma2Encoder fp32 with end-of-image id EOI, state dict as numpy), all random."""
    from transformers import SiglipVisionConfig, T5Gemma2Encoder, T5Gemma2EncoderConfig, T5Gemma2TextConfig

    text = T5Gemma2TextConfig(**TEXT)
    text.dropout_rate = 0.0
    cfg = T5Gemma2EncoderConfig(text_config=text, vision_config=SiglipVisionConfig(**VISION))
    torch.manual_seed(0)
    model = T5Gemma2Encoder(cfg, eoi_token_index=EOI).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "embed" in name else 0.15)
    return cfg.to_dict(), model, {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _batch():
    rng = np.random.default_rng(1)
    seqs = [rng.integers(8, VOCAB, size=n).tolist() for n in (SEQ, 7)]
    seqs[0][3] = EOI
    return dl.pad_batch(seqs, pad_id=0, length=SEQ, side="right")


def _torch(model, ids, mask, dtype):
    with torch.no_grad():
        out = model.to(dtype)(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long())
    model.to(torch.float32)
    return _valid(out.last_hidden_state.double().numpy(), mask)


def _config(cfg_dict, **over):
    return t5gemma2.text_config(cfg_dict, eoi_token_index=EOI, **over)


def _valid(h, mask):
    return h[mask.astype(bool)]


def _vidax(cfg, weights, ids, mask):
    model = dl.load_decoder_llm(cfg, t5gemma2.text_tensors(weights))
    return _valid(np.asarray(dl.hidden_states(model, ids, mask))[-1], mask)


@pytest.fixture(scope="module")
def text_case():
    cfg_dict, model, sd = _build()
    ids, mask = _batch()
    cfg = _config(cfg_dict)
    got = _vidax(cfg, sd, ids, mask)
    want32, want64 = _torch(model, ids, mask, torch.float32), _torch(model, ids, mask, torch.float64)
    err = fp32_error(lambda w: _vidax(cfg, w, ids, mask), sd, base=got)
    return cfg, sd, ids, mask, got, want32, want64, err


def test_config_reads_the_encoder():
    cfg_dict, _, _ = _build()
    cfg = t5gemma2.text_config(cfg_dict)
    assert cfg.bidirectional and cfg.eoi_token_index == t5gemma2.EOI_TOKEN and cfg.gemma_norm and cfg.sandwich_norms
    assert cfg.layer_types == tuple(TEXT["layer_types"]) and cfg.sliding_window == 4
    assert cfg.query_pre_attn_scalar == 256
    with pytest.raises(UserError, match="T5Gemma2 encoder was expected"):
        t5gemma2.text_config({"text_config": dict(cfg_dict["text_config"], model_type="gemma3_text")})


def test_last_hidden_state_matches_transformers_fp32(text_case):
    cfg, sd, ids, mask, got, want32, want64, err = text_case
    assert got.shape == want64.shape == (int(mask.sum()), 32)
    assert_fp32_parity("t5gemma2 text, right-padded", got, want32, want64, vidax_err=err)


def test_leaving_out_a_t5gemma2_detail_moves_past_the_bound(text_case):
    cfg, sd, ids, mask, _, want32, want64, err = text_case
    bound = fp32_bound(want32, want64, err)
    wrong = {"causal attention": dataclasses.replace(cfg, bidirectional=False),
             "no end-of-image embedding": dataclasses.replace(cfg, eoi_token_index=None),
             "window one key shorter ahead": dataclasses.replace(cfg, sliding_window=3),
             "no sliding window": dataclasses.replace(cfg, layer_types=(dl.FULL,) * 4,
                                                      rope=((dl.FULL, cfg.rope_spec(dl.FULL)),))}
    for label, c in wrong.items():
        w = {k: v for k, v in sd.items() if not (c.eoi_token_index is None and k.endswith("eoi_embedding"))}
        e = max_abs(_vidax(c, w, ids, mask), want64)
        print(f"{label}: max abs {e:.3e} vs bound {bound:.3e}")
        assert e > 10 * bound, label


def test_vision_tower_matches_transformers():
    from vidax_core.encoders.towers import encode_vit

    cfg_dict, model, sd = _build()
    pixels = np.random.default_rng(2).standard_normal((2, 3, 28, 28)).astype(np.float32)
    tower = t5gemma2.load_vision(cfg_dict, sd)
    got, pooled = encode_vit(tower, pixels)
    with torch.no_grad():
        want = model.vision_tower(pixel_values=torch.from_numpy(pixels)).last_hidden_state.numpy()
    assert pooled is None and got.shape == want.shape == (2, 4, 16)
    err = max_abs(got, want)
    print(f"t5gemma2 SigLIP last_hidden_state: max abs {err:.2e}")
    assert err < 1e-4
