"""A tiny T5-style (SentencePiece unigram) tokenizer folder, built in-process for tests.

:func:`make_tiny_t5_tokenizer` trains a SentencePiece unigram model on a small built-in English corpus with fixed
parameters (single thread, so the result is deterministic), converts it with transformers' slow->fast path and
``save_pretrained``s it, so the folder holds a ``tokenizer.json`` + ``tokenizer_config.json`` laid out like a real
checkpoint's ``tokenizer/`` folder (T5 conventions: ``<pad>`` = 0, ``</s>`` = 1, ``<unk>`` = 2, no BOS, ``</s>``
appended by the post-processor, no ``<extra_id_*>`` sentinels).

Test-only: imports sentencepiece and transformers.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A cat sits on the warm mat in the afternoon sun.",
    "Two dogs run along a sandy beach at sunset.",
    "A red car drives through the city streets at night.",
    "An astronaut rides a horse on the surface of the moon.",
    "A small boat sails across a calm blue lake.",
    "Children play football in a green park near the river.",
    "A chef slices fresh vegetables in a busy kitchen.",
    "Snow falls slowly over a quiet mountain village.",
    "A panda eats bamboo while sitting in the forest.",
    "The camera pans slowly across a field of yellow flowers.",
    "A woman walks her dog through the rain with an umbrella.",
    "Birds fly over the ocean as waves crash on the rocks.",
    "A robot dances under bright neon lights in the city.",
    "Close up of a cup of hot coffee on a wooden table.",
    "A train crosses an old stone bridge in the valley.",
]

TINY_VOCAB_TARGET = 96


def make_tiny_t5_tokenizer(out_dir: str | os.PathLike) -> Path:
    """Write a tiny T5 tokenizer folder to ``out_dir`` and return it as a Path.

    Read its vocabulary size (to size a model's embedding) with :func:`tokenizer_vocab_size`.
    """
    import sentencepiece as spm
    from transformers import T5TokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 4),
        model_writer=model,
        model_type="unigram",
        vocab_size=TINY_VOCAB_TARGET,
        hard_vocab_limit=False,  # the corpus is tiny: accept a slightly smaller vocabulary than asked for
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        num_threads=1,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "spiece.model"), "wb") as f:
            f.write(model.getvalue())
        tok = T5TokenizerFast.from_pretrained(tmp, extra_ids=0)
        tok.save_pretrained(str(out))
    return out


def make_tiny_gemma_tokenizer(out_dir: str | os.PathLike, padding_side: str = "right") -> Path:
    """A tiny tokenizer folder with Gemma's conventions on the trained tiny vocabulary: ``<pad>`` = 0 pads, a
    ``<bos>`` special token is prepended by the post-processor, ``</s>`` is the EOS (LTX-2's prompt encoder)."""
    import json

    from tokenizers import AddedToken, Tokenizer, processors

    out = Path(out_dir)
    base = make_tiny_t5_tokenizer(out / "_base")
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<bos>", special=True, normalized=False)])
    bos = [("<bos>", tok.token_to_id("<bos>"))]
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=bos)
    (out / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1024, "bos_token": "<bos>",
        "eos_token": "</s>", "pad_token": "<pad>", "padding_side": padding_side}), encoding="utf-8")
    return out


QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def make_tiny_qwen_tokenizer(out_dir: str | os.PathLike, specials=QWEN_SPECIALS) -> Path:
    """A tiny tokenizer folder with Qwen2 / Qwen2.5-VL's conventions on the trained tiny vocabulary: Qwen's chat
    special tokens (``specials``), ``<|endoftext|>`` pads, no post-processor (Qwen adds no tokens), right padding."""
    import json

    from tokenizers import AddedToken, Tokenizer

    out = Path(out_dir)
    base = make_tiny_t5_tokenizer(out / "_base")
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    data = dict(json.loads(tok.to_str()), post_processor=None)
    (out / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|endoftext|>", "eos_token": "<|im_end|>",
        "padding_side": "right", "model_max_length": 32768, "clean_up_tokenization_spaces": False}),
        encoding="utf-8")
    return out


def tokenizer_vocab_size(tokenizer_dir: str | os.PathLike) -> int:
    """Number of token ids (added tokens included) of the ``tokenizer.json`` in ``tokenizer_dir``."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json")).get_vocab_size(with_added_tokens=True)
