"""UMT5 encoder parity against transformers' UMT5EncoderModel (tiny random model, fp32, CPU)."""

import types

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.io.convert import ConversionError
from vidax_core.encoders.umt5 import UMT5_RULES, UMT5Config, encode_text, load_umt5, relative_position_buckets
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_testing.tiny_tokenizer import make_tiny_t5_tokenizer, tokenizer_vocab_size

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

MAX_LEN = 16
PROMPTS = ["A cat.", "Two dogs run along a sandy beach at sunset while birds fly over the ocean."]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return make_tiny_t5_tokenizer(tmp_path_factory.mktemp("tiny_t5_tok"))


@pytest.fixture(scope="module")
def reference(tok_dir):
    """(transformers config dict, torch model, state dict as numpy)."""
    hf_cfg = transformers.UMT5Config(
        vocab_size=tokenizer_vocab_size(tok_dir),
        d_model=32,
        d_kv=8,
        d_ff=48,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
    )
    torch.manual_seed(0)
    model = transformers.UMT5EncoderModel(hf_cfg).eval().float()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1)
        for name, p in model.named_parameters():
            if "layer_norm" in name:  # keep norms near 1 but not exactly 1
                p.add_(1.0)
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return hf_cfg.to_dict(), model, sd


def _tokens(tok_dir):
    return TextTokenizer.from_dir(tok_dir)(PROMPTS, MAX_LEN)


def test_config_from_transformers_dict(reference):
    cfg_dict, _, _ = reference
    cfg = UMT5Config.from_config(cfg_dict)
    assert (cfg.d_model, cfg.d_kv, cfg.d_ff, cfg.num_layers, cfg.num_heads) == (32, 8, 48, 2, 4)
    assert cfg.is_gated and cfg.act_name == "gelu_new"
    with pytest.raises(ValueError, match="feed_forward_proj"):
        UMT5Config(feed_forward_proj="gated-tanh-x")


@pytest.mark.parametrize("num_buckets,max_distance,length", [(8, 16, 40), (32, 128, 512)])
def test_relative_position_buckets_match_transformers(num_buckets, max_distance, length):
    from transformers.models.umt5.modeling_umt5 import UMT5Attention

    fake = types.SimpleNamespace(
        is_decoder=False, relative_attention_num_buckets=num_buckets, relative_attention_max_distance=max_distance
    )
    rel = torch.arange(length)[None, :] - torch.arange(length)[:, None]
    want = UMT5Attention._relative_position_bucket(fake, rel).numpy()
    np.testing.assert_array_equal(relative_position_buckets(length, length, num_buckets, max_distance), want)


def test_last_hidden_state_matches_transformers(reference, tok_dir):
    cfg_dict, model, sd = reference
    ids, mask = _tokens(tok_dir)
    assert 1 < mask[0].sum() < mask[1].sum()  # two different true lengths, the first padded
    with torch.no_grad():
        want = model(torch.from_numpy(ids).long(), torch.from_numpy(mask).long()).last_hidden_state.numpy()
    enc = load_umt5(UMT5Config.from_config(cfg_dict), sd)
    got = np.asarray(enc(jnp.asarray(ids), jnp.asarray(mask)))
    assert got.dtype == np.float32 and got.shape == want.shape == (2, MAX_LEN, 32)
    err = np.abs(got - want).max()
    rel = err / np.abs(want).max()
    print(f"UMT5 parity: max abs err {err:.3e}, rel err {rel:.3e}")
    assert err <= 1e-5 and rel <= 1e-5


def test_encode_text_matches_wan_pipeline_formula(reference, tok_dir):
    cfg_dict, model, sd = reference
    ids, mask = _tokens(tok_dir)
    max_seq = MAX_LEN
    # diffusers WanPipeline._get_t5_prompt_embeds, restated in torch
    with torch.no_grad():
        t_ids, t_mask = torch.from_numpy(ids).long(), torch.from_numpy(mask).long()
        seq_lens = t_mask.gt(0).sum(dim=1).long()
        emb = model(t_ids, t_mask).last_hidden_state
        emb = [u[:v] for u, v in zip(emb, seq_lens)]
        want = torch.stack([torch.cat([u, u.new_zeros(max_seq - u.size(0), u.size(1))]) for u in emb]).numpy()
    enc = load_umt5(UMT5Config.from_config(cfg_dict), sd)
    got = np.asarray(encode_text(enc, ids, mask, max_seq))
    assert got.shape == (2, max_seq, 32)
    n0 = int(mask[0].sum())
    assert (got[0, n0:] == 0).all() and np.abs(got[0, :n0]).min() > 0
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    # shorter token length than max_sequence_length: zero-padded along the sequence axis
    short = np.asarray(encode_text(enc, ids[:, :12], mask[:, :12], max_seq))
    assert short.shape == (2, max_seq, 32) and (short[:, 12:] == 0).all()


def test_tied_embedding_either_key(reference):
    cfg_dict, _, sd = reference
    cfg = UMT5Config.from_config(cfg_dict)
    ids = jnp.asarray([[5, 7, 1, 0]], jnp.int32)
    mask = jnp.asarray([[1, 1, 1, 0]], jnp.int32)
    full = np.asarray(load_umt5(cfg, sd)(ids, mask))
    for drop in ("shared.weight", "encoder.embed_tokens.weight"):
        part = {k: v for k, v in sd.items() if k != drop}
        np.testing.assert_array_equal(np.asarray(load_umt5(cfg, part)(ids, mask)), full)
    with pytest.raises(ValueError, match="embedding"):
        load_umt5(cfg, {k: v for k, v in sd.items() if "embed" not in k and k != "shared.weight"})


def test_broken_checkpoint_reports_every_problem(reference):
    cfg_dict, _, sd = reference
    cfg = UMT5Config.from_config(cfg_dict)
    bad = dict(sd)
    del bad["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"]
    bad["encoder.final_layer_norm.weight"] = np.ones(7, np.float32)
    bad["encoder.block.0.layer.0.SelfAttention.extra.weight"] = np.ones(3, np.float32)
    with pytest.raises(ConversionError) as e:
        load_umt5(cfg, bad)
    assert e.value.missing and e.value.mismatched and e.value.unexpected
    assert any("relative_attention_bias layers [1]" in m for m in e.value.missing)
    assert len(UMT5_RULES) == 7
