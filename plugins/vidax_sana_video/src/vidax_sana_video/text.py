"""SANA-Video's prompt encoding, as the pipelines' ``encode_prompt``:

* each text is lower-cased and stripped (``_text_preprocessing`` without ``clean_caption``);
* the prompt (not the negative prompt) follows the "complex human instruction": its lines joined by newlines, then
  the prompt; the tokenizer (right padding, Gemma's ``<bos>``) pads and truncates it to ``n + max_sequence_length
  - 2`` tokens, ``n`` the instruction's own token count with ``<bos>``;
* Gemma-2 (``text_encoder``, the core's decoder LLM, ``Gemma2Model``) encodes it with its mask; the last hidden
  state (after the final norm) and the mask keep token 0 (``<bos>``) and the last ``max_sequence_length - 1``
  tokens, dropping the instruction's (the pipeline's ``select_index``);
* the negative prompt is encoded alone, ``max_sequence_length`` tokens.

The denoiser gets ``{"hidden": (N, L, caption_channels), "mask": (N, L)}``; prompt and negative prompt have the
same length, so the guidance branches run in one batch. The core hands the prompts in the order the guidance reads
them: the prompt first, the negative prompt second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vidax_core import TextTokenizer, UserError, encode_llm, load_llm, load_tokenizer


@dataclass
class SanaTextEncoder:
    tokenizer: TextTokenizer
    gemma: Any  # vidax_core.encoders.decoder_llm.DecoderLLM


def load(ckpt: Any, *, dtype: Any, mesh: Any = None) -> SanaTextEncoder:
    """The tokenizer (padding on the right, as the pipelines set it) and Gemma-2 in ``dtype``, tensor-parallel over
    ``mesh``'s tp axis."""
    tokenizer = dataclasses.replace(load_tokenizer(ckpt, "tokenizer"), padding_side="right")
    gemma = load_llm(ckpt, "text_encoder", dtype=dtype, mesh=mesh, label="text encoder (Gemma-2)")
    return SanaTextEncoder(tokenizer, gemma)


def token_ids(tokenizer: TextTokenizer, text: str, max_sequence_length: int,
              instruction: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(ids, mask) (1, n) of ``text`` as the pipeline tokenizes it, and the positions the pipeline keeps of the
    encoder's states (None: all of them)."""
    text = text.lower().strip()
    if not instruction:
        ids, mask = tokenizer([text], max_sequence_length)
        return ids, mask, None
    prefix = "\n".join(instruction)
    length = len(tokenizer.encode_ids(prefix)) + max_sequence_length - 2
    ids, mask = tokenizer([prefix + text], length)
    keep = np.asarray([0] + list(range(length - max_sequence_length + 1, length)), np.int64)
    if len(keep) != max_sequence_length or keep[-1] >= length:
        raise UserError(f"sampling.max_sequence_length={max_sequence_length} leaves no room after the complex human "
                        "instruction: use at least 2")
    return ids, mask, keep


def encode_one(encoder: SanaTextEncoder, text: str, max_sequence_length: int,
               instruction: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """(hidden (1, max_sequence_length, D) float32, mask (1, max_sequence_length) int32) of one text."""
    ids, mask, keep = token_ids(encoder.tokenizer, text, max_sequence_length, instruction)
    hidden, mask = encode_llm(encoder.gemma, ids, mask, layers=-1)
    if keep is not None:
        hidden, mask = hidden[:, keep], mask[:, keep]
    return hidden, mask


def encode_for_run(encoder: SanaTextEncoder, prompts: Sequence[str], run: Any) -> dict[str, np.ndarray]:
    """The prompt (position 0) with the run's ``complex_human_instruction``, the negative prompt without."""
    n = int(run.sampling.max_sequence_length)
    instruction = list(run.options.get("complex_human_instruction") or [])
    parts = [encode_one(encoder, p, n, instruction if i == 0 else None) for i, p in enumerate(prompts)]
    return {"hidden": np.concatenate([h for h, _ in parts]), "mask": np.concatenate([m for _, m in parts])}
