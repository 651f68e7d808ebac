"""Kandinsky's prompt encoders, as the pipelines' ``encode_prompt`` for one prompt (Kandinsky 5's below; Kandinsky
6's differs only in its :class:`PromptFormat`: its own template and crop of 129 tokens, no cleaning, no cut of its
own):

* the prompt is cleaned (``prompt_clean``: HTML unescaped twice, whitespace collapsed) and put into the
  pipeline's template (:data:`vidax_kandinsky.presets.PROMPT_TEMPLATE`);
* Qwen2.5-VL (``text_encoder``, the core decoder LLM): the templated text, at most ``CROP_START +
  max_sequence_length`` tokens (a longer one is first cut by the pipeline's own rule, :func:`fit_template`), NOT
  padded (the pipeline pads to the longest prompt of its batch, and each vidax prompt is its own batch) and run
  without a mask; the last hidden state (after the final norm) from token ``CROP_START`` on;
* CLIP-L text (``text_encoder_2``): the cleaned prompt padded to 77 tokens, run with its mask; the pooled output.

The DiT receives ``{"hidden": (1, L, 3584), "pooled": (1, 768)}`` per prompt; prompts of different lengths are
separate contexts (the core runs their guidance branches one after the other, as the pipeline does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vidax_core import (TextTokenizer, UserError, encode_llm, encode_vit, load_llm, load_tokenizer, load_vit_tower,
                        prompt_clean)

from .presets import CLIP_LENGTH, CROP_START, PROMPT_TEMPLATE


@dataclass
class KandinskyTextEncoder:
    tokenizer: TextTokenizer
    qwen: Any  # vidax_core.DecoderLLM
    clip_tokenizer: TextTokenizer
    clip: Any  # vidax_core.ViTEncoder (CLIP text)


def load(ckpt: Any, *, dtype: Any, mesh: Any = None) -> KandinskyTextEncoder:
    """Qwen2.5-VL (``tokenizer`` / ``text_encoder``, in ``dtype``, tensor-parallel over ``mesh``'s tp axis) and
    CLIP-L text (``tokenizer_2`` / ``text_encoder_2``, float32)."""
    qwen = load_llm(ckpt, "text_encoder", dtype=dtype, mesh=mesh, label="text encoder (Qwen2.5-VL)")
    clip = load_vit_tower(ckpt, "text_encoder_2", "clip_text", label="text encoder 2 (CLIP-L text)")
    return KandinskyTextEncoder(load_tokenizer(ckpt, "tokenizer"), qwen, load_tokenizer(ckpt, "tokenizer_2"), clip)


@dataclass(frozen=True)
class PromptFormat:
    """How a pipeline puts a prompt to Qwen: its chat ``template``, the tokens ``crop`` it drops after encoding,
    whether it cleans the prompt first (``clean``) and cuts an over-long templated prompt by its own rule (``fit``,
    :func:`fit_template`) before the tokenizer truncates it."""

    template: str = PROMPT_TEMPLATE
    crop: int = CROP_START
    clean: bool = True
    fit: bool = True


KANDINSKY5 = PromptFormat()


def fit_template(tokenizer: TextTokenizer, text: str, max_sequence_length: int) -> str:
    """The pipeline's cut of a templated prompt longer than ``CROP_START + max_sequence_length`` tokens: the text
    of its tokens from ``CROP_START + max_sequence_length - 2`` to the last two is decoded, and that many characters
    are removed from the end of the templated text (the tokenizer's truncation then finishes the cut)."""
    ids = tokenizer.encode_ids(text)
    if len(ids) <= CROP_START + max_sequence_length:
        return text
    removed = tokenizer.decode(ids[CROP_START:-2][max_sequence_length - 2:])
    return text[:-len(removed)] if removed else text


def qwen_tokens(tokenizer: TextTokenizer, prompt: str, max_sequence_length: int,
                fmt: PromptFormat = KANDINSKY5) -> np.ndarray:
    """(1, n) token ids of the templated prompt, as the pipeline feeds Qwen (unpadded, truncated)."""
    text = fmt.template.format(prompt)
    if fmt.fit:
        text = fit_template(tokenizer, text, max_sequence_length)
    ids, mask = tokenizer([text], fmt.crop + max_sequence_length)
    ids = ids[0][mask[0] > 0]
    if len(ids) <= fmt.crop:
        raise UserError(f"the templated prompt has {len(ids)} tokens, not more than the {fmt.crop} of the "
                        "template's system turn that the pipeline crops: the tokenizer is not Qwen2.5-VL's")
    return ids[None]


def encode_one(encoder: KandinskyTextEncoder, prompt: str, max_sequence_length: int,
               fmt: PromptFormat = KANDINSKY5) -> dict[str, np.ndarray]:
    """``{"hidden": (1, L, D) float32, "pooled": (1, D_clip) float32}`` of one prompt."""
    if fmt.clean:
        prompt = prompt_clean(prompt)
    ids = qwen_tokens(encoder.tokenizer, prompt, max_sequence_length, fmt)
    hidden, _ = encode_llm(encoder.qwen, ids, None, layers=-1, crop_start=fmt.crop)
    clip_ids, clip_mask = encoder.clip_tokenizer([prompt], CLIP_LENGTH)
    _, pooled = encode_vit(encoder.clip, clip_ids, attention_mask=clip_mask)
    return {"hidden": hidden, "pooled": pooled}


def encode_for_run(encoder: KandinskyTextEncoder, prompts: Sequence[str], run: Any,
                   fmt: PromptFormat = KANDINSKY5) -> list[dict[str, np.ndarray]]:
    """One context per prompt (``sampling.max_sequence_length`` Qwen tokens after the template at most)."""
    n = int(run.sampling.max_sequence_length)
    return [encode_one(encoder, p, n, fmt) for p in prompts]
