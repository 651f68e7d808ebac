"""Test kit for ComfyUI-style single files: a text encoder's ``scaled_fp8`` file and the float32 weights it
dequantises to, and a tiny Gemma SentencePiece model with its transformers ``tokenizer.json`` twin (test-only:
sentencepiece and transformers build them)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np


def scaled_fp8(tensors: Mapping[str, np.ndarray], kernel: Callable[[str, np.ndarray], bool]
               ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(ComfyUI ``scaled_fp8`` tensors, the float32 weights they read as): each ``kernel`` weight as float8_e4m3fn
    with its per-tensor ``scale_weight``, the ``scaled_fp8`` marker, every other tensor as it is."""
    import ml_dtypes

    comfy: dict[str, Any] = {}
    deq: dict[str, np.ndarray] = {}
    for k, v in tensors.items():
        if kernel(k, v):
            scale = np.float32(np.abs(v).max() / 448.0)
            q = (v / scale).astype(ml_dtypes.float8_e4m3fn)
            comfy[k], comfy[k[:-len("weight")] + "scale_weight"] = q, np.array([scale], np.float32)
            deq[k] = q.astype(np.float32) * scale
        else:
            comfy[k], deq[k] = v, np.asarray(v).astype(np.float32)
    comfy["scaled_fp8"] = np.zeros(0, ml_dtypes.float8_e4m3fn)
    return comfy, deq


def gemma_spiece(dest: str | os.PathLike, vocab_size: int = 80) -> bytes:
    """A tiny Gemma-convention SentencePiece BPE model (``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3, no
    dummy prefix), returned as bytes; ``dest`` receives transformers' ``GemmaTokenizer`` of it (``tokenizer.json``),
    the oracle a ComfyUI Gemma file's ``spiece_model`` must tokenize like."""
    import sentencepiece as spm
    from transformers import AutoTokenizer

    from vidax_core.testing.tokenizers import _CORPUS

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 4), model_writer=model, model_type="bpe", vocab_size=vocab_size,
        hard_vocab_limit=False, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
        bos_piece="<bos>", unk_piece="<unk>", character_coverage=1.0, num_threads=1, minloglevel=2,
        add_dummy_prefix=False, remove_extra_whitespaces=False, split_by_whitespace=False)
    raw = model.getvalue()
    src = Path(dest) / "_spm"
    src.mkdir(parents=True, exist_ok=True)
    (src / "tokenizer.model").write_bytes(raw)
    (src / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
        "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False}))
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(dest))
    return raw
