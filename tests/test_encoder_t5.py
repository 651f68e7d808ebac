"""The T5 encoder base against transformers on tiny configs of every configuration the families need:
UMT5 (``UMT5EncoderModel``, per-layer bias), T5 v1.1 (``T5EncoderModel``, gated-gelu, shared bias) and byT5
(``T5EncoderModel`` over the byte vocabulary). fp32 tolerances come from the reference's own fp32-vs-fp64 error;
bf16 runs of vidax are held to the reference's own bf16-vs-fp32 error."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.encoders.byte_tokenizer import ByteTokenizer
from vidax_core.encoders.t5 import (
    T5_RULES,
    UMT5_RULES,
    T5Config,
    encode_text,
    load_t5,
    relative_position_buckets,
)
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.io.convert import ConversionError
from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

MAX_LEN = 16
PROMPTS = ["A cat.", "Two dogs run along a sandy beach at sunset while birds fly over the ocean."]
TINY = dict(d_model=32, d_kv=8, d_ff=48, num_layers=3, num_heads=4, relative_attention_num_buckets=8,
            relative_attention_max_distance=16, dropout_rate=0.0)
VARIANTS = {
    "umt5": ("UMT5Config", "UMT5EncoderModel", dict(feed_forward_proj="gated-gelu")),
    "t5_v1_1": ("T5Config", "T5EncoderModel", dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    "byt5": ("T5Config", "T5EncoderModel", dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                                                 vocab_size=384)),
    "t5_relu": ("T5Config", "T5EncoderModel", dict(feed_forward_proj="relu")),
}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return make_tiny_t5_tokenizer(tmp_path_factory.mktemp("tiny_t5_tok"))


def _tokens(variant, tok_dir):
    if variant == "byt5":
        ids, mask = ByteTokenizer.create()(PROMPTS, 40)
    else:
        ids, mask = TextTokenizer.from_dir(tok_dir)(PROMPTS, MAX_LEN)
    assert 1 < mask[0].sum() < mask[1].sum()  # two different true lengths, the first padded
    return ids, mask


def _build(variant, tok_dir):
    cfg_cls, model_cls, extra = VARIANTS[variant]
    hf_cfg = getattr(transformers, cfg_cls)(**{"vocab_size": tokenizer_vocab_size(tok_dir), **TINY, **extra})
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(hf_cfg).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.1)
            if "layer_norm" in name:  # keep norms near 1 but not exactly 1
                p.add_(1.0)
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return hf_cfg.to_dict(), model, sd


@pytest.fixture(scope="module", params=list(VARIANTS))
def reference(request, tok_dir):
    """(variant, transformers config dict, torch model, state dict as numpy)."""
    return (request.param, *_build(request.param, tok_dir))


def _run_torch(model, ids, mask, dtype):
    import copy

    m = copy.deepcopy(model).to(dtype)
    with torch.no_grad():
        return m(torch.from_numpy(ids).long(), torch.from_numpy(mask).long()).last_hidden_state.double().numpy()


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_config_from_transformers_dict(reference):
    variant, cfg_dict, _, _ = reference
    cfg = T5Config.from_config(cfg_dict)
    assert (cfg.d_model, cfg.d_kv, cfg.d_ff, cfg.num_layers, cfg.num_heads) == (32, 8, 48, 3, 4)
    assert cfg.per_layer_bias == (variant == "umt5")
    assert cfg.is_gated == (variant != "t5_relu")
    assert cfg.act_name == ("relu" if variant == "t5_relu" else "gelu_new")
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5Config(feed_forward_proj="gated-tanh-x")
    assert T5Config(model_type="t5", position_bias_per_layer=True).per_layer_bias


@pytest.mark.parametrize("num_buckets,max_distance,length", [(8, 16, 40), (32, 128, 512)])
def test_relative_position_buckets_match_transformers(num_buckets, max_distance, length):
    from transformers.models.t5.modeling_t5 import T5Attention

    fake = types.SimpleNamespace(
        is_decoder=False, relative_attention_num_buckets=num_buckets, relative_attention_max_distance=max_distance
    )
    rel = torch.arange(length)[None, :] - torch.arange(length)[:, None]
    want = T5Attention._relative_position_bucket(rel, True, num_buckets, max_distance).numpy()
    np.testing.assert_array_equal(relative_position_buckets(length, length, num_buckets, max_distance), want)
    del fake


def test_last_hidden_state_matches_transformers_fp32(reference, tok_dir):
    variant, cfg_dict, model, sd = reference
    ids, mask = _tokens(variant, tok_dir)
    want64 = _run_torch(model, ids, mask, torch.float64)
    want32 = _run_torch(model, ids, mask, torch.float32)
    ref_err = np.abs(want32 - want64).max()
    enc = load_t5(T5Config.from_config(cfg_dict), sd)
    got = np.asarray(enc(jnp.asarray(ids), jnp.asarray(mask)))
    assert got.dtype == np.float32 and got.shape == want64.shape == (2, ids.shape[1], 32)
    err = np.abs(got - want64).max()
    print(f"{variant} fp32: vidax-vs-fp64 max abs {err:.3e} (rel {_rel(got, want64):.3e}); "
          f"transformers fp32-vs-fp64 {ref_err:.3e}")
    assert err <= 8 * max(ref_err, np.finfo(np.float32).eps * np.abs(want64).max())


def test_bf16_within_reference_bf16_error(reference, tok_dir):
    variant, cfg_dict, model, sd = reference
    ids, mask = _tokens(variant, tok_dir)
    ref32 = _run_torch(model, ids, mask, torch.float32)
    ref16 = _run_torch(model, ids, mask, torch.bfloat16)
    ref_rel = _rel(ref16, ref32)
    cfg32 = T5Config.from_config(cfg_dict)
    got32 = np.asarray(load_t5(cfg32, sd)(jnp.asarray(ids), jnp.asarray(mask)))
    got16 = np.asarray(load_t5(T5Config.from_config(cfg_dict, dtype=jnp.bfloat16), sd)(ids, mask))
    assert got16.dtype == np.float32  # output policy: float32 last_hidden_state
    rel = _rel(got16, got32)
    print(f"{variant} bf16: vidax bf16-vs-fp32 rel {rel:.3e}; transformers bf16-vs-fp32 rel {ref_rel:.3e}")
    assert 0 < rel <= 2 * ref_rel


def test_encode_text_matches_wan_pipeline_formula(tok_dir):
    """diffusers' WanPipeline._get_t5_prompt_embeds, restated in torch and applied to the encoder's own hidden
    states, gives exactly what encode_text returns (the encoder itself is checked by the parity tests above)."""
    cfg_dict, _, sd = _build("umt5", tok_dir)
    ids, mask = _tokens("umt5", tok_dir)
    max_seq = MAX_LEN + 4
    enc = load_t5(T5Config.from_config(cfg_dict), sd)
    # jitted as encode_text is (an eager run rounds differently from a compiled one)
    hidden = torch.from_numpy(np.asarray(jax.jit(lambda e, i, m: e(i, m))(enc, jnp.asarray(ids), jnp.asarray(mask))))
    seq_lens = torch.from_numpy(mask).gt(0).sum(dim=1).long()
    emb = [u[:v] for u, v in zip(hidden, seq_lens)]
    want = torch.stack([torch.cat([u, u.new_zeros(max_seq - u.size(0), u.size(1))]) for u in emb]).numpy()
    got = np.asarray(encode_text(enc, ids, mask, max_seq))
    assert got.shape == (2, max_seq, 32)
    n0 = int(mask[0].sum())
    assert (got[0, n0:] == 0).all() and np.abs(got[0, :n0]).min() > 0
    np.testing.assert_array_equal(got, want)
    short = np.asarray(encode_text(enc, ids[:, :12], mask[:, :12], max_seq))
    assert short.shape == (2, max_seq, 32) and (short[:, 12:] == 0).all()
    with pytest.raises(ValueError, match="max_sequence_length"):
        encode_text(enc, ids, mask, MAX_LEN - 1)


def test_tied_embedding_either_key(reference):
    variant, cfg_dict, _, sd = reference
    cfg = T5Config.from_config(cfg_dict)
    ids = jnp.asarray([[5, 7, 1, 0]], jnp.int32)
    mask = jnp.asarray([[1, 1, 1, 0]], jnp.int32)
    full = np.asarray(load_t5(cfg, sd)(ids, mask))
    for drop in ("shared.weight", "encoder.embed_tokens.weight"):
        part = {k: v for k, v in sd.items() if k != drop}
        np.testing.assert_array_equal(np.asarray(load_t5(cfg, part)(ids, mask)), full)
    with pytest.raises(ValueError, match="embedding"):
        load_t5(cfg, {k: v for k, v in sd.items() if "embed" not in k and k != "shared.weight"})


def test_broken_checkpoint_reports_every_problem(tok_dir):
    cfg_dict, _, sd = _build("umt5", tok_dir)
    cfg = T5Config.from_config(cfg_dict)
    bad = dict(sd)
    del bad["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"]
    bad["encoder.final_layer_norm.weight"] = np.ones(7, np.float32)
    bad["encoder.block.0.layer.0.SelfAttention.extra.weight"] = np.ones(3, np.float32)
    with pytest.raises(ConversionError) as e:
        load_t5(cfg, bad)
    assert e.value.missing and e.value.mismatched and e.value.unexpected
    assert any("relative_attention_bias layers [1]" in m for m in e.value.missing)
    assert len(UMT5_RULES) == len(T5_RULES) == 7


def test_bias_layout_mismatch_is_reported(tok_dir):
    """A T5 checkpoint read as UMT5 (per-layer tables) misses layers 1.. and says so, and vice versa."""
    cfg_dict, _, sd = _build("t5_v1_1", tok_dir)
    with pytest.raises(ConversionError, match="relative_attention_bias"):
        load_t5(T5Config.from_config(cfg_dict, position_bias_per_layer=True), sd)
    cfg_dict, _, sd = _build("umt5", tok_dir)
    with pytest.raises(ConversionError, match="relative_attention_bias"):
        load_t5(T5Config.from_config(cfg_dict, position_bias_per_layer=False), sd)
