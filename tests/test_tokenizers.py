"""Tokenizers from spiece.model (SentencePiece) and byT5's bytes against transformers' T5Tokenizer / ByT5Tokenizer,
and ``TextTokenizer.from_dir`` picking the right one for each kind of folder."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from vidax_core.encoders.byte_tokenizer import ByteTokenizer
from vidax_core.encoders.spiece_tokenizer import SpieceTokenizer
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.errors import UserError
from vidax_core.testing.tokenizers import TINY_VOCAB_TARGET, _CORPUS, make_tiny_t5_tokenizer

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

PROMPTS = [
    "A cat.",
    "The quick brown fox jumps over the lazy dog while two dogs run along a sandy beach at sunset in the rain.",
    "",
    "Ünïcödé prompt: 日本の猫 🐱 — café naïve",
    "  extra   spaces\tand\nnewlines  ",
    "a </s> b <extra_id_0>c x<pad>y <unk> z",
    "ends with eos </s>",
]


@pytest.fixture(scope="module")
def spiece_dir(tmp_path_factory):
    """A T5 v1.1-style folder: spiece.model + tokenizer_config.json (no tokenizer.json)."""
    out = tmp_path_factory.mktemp("spiece_tok")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 4), model_writer=model, model_type="unigram", vocab_size=TINY_VOCAB_TARGET,
        hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0, num_threads=1,
        shuffle_input_sentence=False, minloglevel=2,
    )
    (out / "spiece.model").write_bytes(model.getvalue())
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "T5Tokenizer", "extra_ids": 100, "eos_token": "</s>", "pad_token": "<pad>",
         "unk_token": "<unk>", "model_max_length": 512}))
    return out


@pytest.fixture(scope="module")
def byt5_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("byt5_tok")
    transformers.ByT5Tokenizer().save_pretrained(str(out))
    return out


def _reference(path, texts, max_length):
    ref = transformers.AutoTokenizer.from_pretrained(str(path))
    out = ref(texts, padding="max_length", max_length=max_length, truncation=True, return_attention_mask=True)
    return ref, np.asarray(out["input_ids"]), np.asarray(out["attention_mask"])


@pytest.mark.parametrize("max_length", [6, 16, 48])
def test_spiece_matches_transformers_t5_tokenizer(spiece_dir, max_length):
    ref, want_ids, want_mask = _reference(spiece_dir, PROMPTS, max_length)
    tok = TextTokenizer.from_dir(spiece_dir)
    assert isinstance(tok, SpieceTokenizer)
    assert tok.vocab_size == len(ref)
    ids, mask = tok(PROMPTS, max_length)
    assert ids.dtype == mask.dtype == np.int32 and ids.shape == (len(PROMPTS), max_length)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(mask, want_mask)


@pytest.mark.parametrize("max_length", [5, 16, 64])
def test_byte_tokenizer_matches_transformers_byt5(byt5_dir, max_length):
    ref, want_ids, want_mask = _reference(byt5_dir, PROMPTS, max_length)
    tok = TextTokenizer.from_dir(byt5_dir)
    assert isinstance(tok, ByteTokenizer)
    assert tok.vocab_size == len(ref) == 384
    ids, mask = tok(PROMPTS, max_length)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(mask, want_mask)


def test_byte_ids_are_utf8_bytes_plus_three():
    ids, mask = ByteTokenizer.create()(["é!"], 5)
    assert ids.tolist() == [[0xC3 + 3, 0xA9 + 3, ord("!") + 3, 1, 0]] and mask.tolist() == [[1, 1, 1, 1, 0]]


def test_left_padding_and_truncation_sides(spiece_dir, tmp_path):
    folder = tmp_path / "left"
    folder.mkdir()
    (folder / "spiece.model").write_bytes((spiece_dir / "spiece.model").read_bytes())
    cfg = json.loads((spiece_dir / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**cfg, "padding_side": "left",
                                                              "truncation_side": "left"}))
    _, want_ids, want_mask = _reference(folder, PROMPTS, 12)
    ids, mask = TextTokenizer.from_dir(folder)(PROMPTS, 12)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(mask, want_mask)


def test_tokenizer_json_folders_still_use_tokenizers_library(tmp_path):
    tok = TextTokenizer.from_dir(make_tiny_t5_tokenizer(tmp_path / "fast"))
    assert isinstance(tok, TextTokenizer)


def test_folder_without_any_tokenizer_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="spiece.model"):
        TextTokenizer.from_dir(tmp_path)
    (tmp_path / "spiece.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match="SentencePiece"):
        TextTokenizer.from_dir(tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"extra_ids": [0, 0, 0]}, "extra_ids in tokenizer_config.json must be a whole number"),
    ({"extra_ids": -1}, "extra_ids in tokenizer_config.json must be a whole number"),
    ({"extra_ids": 10**9}, "extra_ids in tokenizer_config.json must be a whole number"),
    ({"added_tokens_decoder": {"x": {"content": "<a>"}}}, "added_tokens_decoder key 'x' is not a token id"),
    ({"added_tokens_decoder": [1, 2]}, "added_tokens_decoder in tokenizer_config.json must be an object"),
])
@pytest.mark.parametrize("kind", ["spiece", "byt5"])
def test_a_broken_tokenizer_config_is_one_line(kind, change, message, spiece_dir, byt5_dir, tmp_path):
    """What `make fuzz` found: a list as extra_ids reached int() inside the prompt encoder's build."""
    source = spiece_dir if kind == "spiece" else byt5_dir
    folder = tmp_path / kind
    folder.mkdir()
    for f in source.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((source / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(UserError, match=message):
        (SpieceTokenizer if kind == "spiece" else ByteTokenizer).from_dir(folder)
