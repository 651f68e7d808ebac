"""TextTokenizer (tokenizers library only) against transformers' tokenizer on a tiny T5 tokenizer folder."""

import numpy as np
import pytest

from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

PROMPTS = [
    "A cat.",
    "The quick brown fox jumps over the lazy dog while two dogs run along a sandy beach at sunset in the rain.",
    "",
    "Ünïcödé prompt: 日本の猫 🐱 — café naïve",
    "  extra   spaces\tand\nnewlines  ",
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return make_tiny_t5_tokenizer(tmp_path_factory.mktemp("tiny_t5_tok"))


@pytest.mark.parametrize("max_length", [8, 16, 40])
def test_ids_and_mask_match_transformers(tok_dir, max_length):
    transformers = pytest.importorskip("transformers")
    ref = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    out = ref(
        PROMPTS,
        padding="max_length",
        max_length=max_length,
        truncation=True,
        add_special_tokens=True,
        return_attention_mask=True,
        return_tensors="np",
    )
    ids, mask = TextTokenizer.from_dir(tok_dir)(PROMPTS, max_length)
    assert ids.dtype == np.int32 and mask.dtype == np.int32
    assert ids.shape == mask.shape == (len(PROMPTS), max_length)
    np.testing.assert_array_equal(ids, out["input_ids"])
    np.testing.assert_array_equal(mask, out["attention_mask"])


def test_t5_conventions(tok_dir):
    tok = TextTokenizer.from_dir(tok_dir)
    ids, mask = tok(["", "A cat."], 8)
    assert tok.pad_id == 0 and tok.vocab_size == tokenizer_vocab_size(tok_dir)
    np.testing.assert_array_equal(ids[0], [1, 0, 0, 0, 0, 0, 0, 0])  # empty prompt: just </s>
    np.testing.assert_array_equal(mask[0], [1, 0, 0, 0, 0, 0, 0, 0])
    n = int(mask[1].sum())
    assert ids[1, n - 1] == 1 and (ids[1, n:] == 0).all()
    # a string is a batch of one; truncation keeps the trailing </s>
    long_ids, long_mask = tok(PROMPTS[1], 8)
    assert long_ids.shape == (1, 8) and long_mask.all() and long_ids[0, -1] == 1


def test_missing_tokenizer_json_names_folder(tmp_path):
    with pytest.raises(ValueError, match=str(tmp_path)):
        TextTokenizer.from_dir(tmp_path)
