"""Cosmos-Predict2.5's prompt encoder: Cosmos-Reason1 (a Qwen2.5-VL text tower) on the core's decoder LLM.

As the pipeline's ``_get_prompt_embeds``: the prompt goes into a chat (the reference system prompt, then the user
turn; no generation prompt) rendered with the tokenizer's own chat template, tokenized without special tokens
added beyond the template's and padded (or truncated) to ``max_sequence_length``; the model runs WITHOUT an
attention mask (padding tokens are attended, positions are 0..L-1). Every hidden state after the embedding layer
(the last one after the final norm, as transformers returns it) is normalised over its features by its mean and
unbiased standard deviation (+ 1e-8), and the normalised layers are concatenated on the feature axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.chat_template import load_chat_template, render_chat, special_tokens
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.io.checkpoint import read_json_file

from .presets import SYSTEM_PROMPT


@dataclass
class CosmosTextEncoder:
    tokenizer: TextTokenizer
    template: str
    special: dict
    model: dl.DecoderLLM


def check_template(tokenizer_dir: str) -> list[str]:
    """Before any weight loads: the checkpoint's chat template loads and renders a prompt (within the core's
    bounds), so a broken template is one line now rather than an error after the text encoder loaded."""
    import os

    from vidax_core.errors import UserError

    try:
        template = load_chat_template(tokenizer_dir)
        where = os.path.join(tokenizer_dir, "chat_template.jinja")
        if not os.path.isfile(where):
            where = os.path.join(tokenizer_dir, "tokenizer_config.json") + " chat_template"
        render_chat(template, _messages("a test prompt"), add_generation_prompt=False, special={},
                    add_vision_id=False, where=where)
    except UserError as exc:
        return [str(exc)]
    return []


def _messages(prompt: str) -> list[dict]:
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
    ]


def chat_text(encoder: CosmosTextEncoder, prompt: str) -> str:
    messages = _messages(prompt)
    return render_chat(encoder.template, messages, add_generation_prompt=False, special=encoder.special,
                       add_vision_id=False)


def load(tokenizer_dir: str, config: dict, tensors: Any, *, dtype: Any, mesh: Any = None) -> CosmosTextEncoder:
    """Tokenizer, chat template and the decoder LLM (tensor-parallel over ``mesh``'s tp axis when it has one)."""
    import os

    tok = TextTokenizer.from_dir(tokenizer_dir)
    cfg_file = os.path.join(tokenizer_dir, "tokenizer_config.json")
    tok_cfg = read_json_file(cfg_file) if os.path.isfile(cfg_file) else {}
    template = load_chat_template(tokenizer_dir)
    cfg = dl.DecoderLLMConfig.from_config(config, dtype=dtype)
    model = dl.load_decoder_llm(cfg, tensors, component="text encoder (Cosmos-Reason1 / Qwen2.5-VL)", mesh=mesh)
    return CosmosTextEncoder(tok, template, special_tokens(tok_cfg if isinstance(tok_cfg, dict) else {}), model)


@jax.jit
def normalized_layers(hidden: jax.Array) -> jax.Array:
    """(N + 1, B, L, D) hidden states -> (B, L, N * D): layers 1..N, each ``(h - mean) / (std + 1e-8)`` over D
    (unbiased std), concatenated in layer order."""
    h = hidden[1:].astype(jnp.float32)
    d = h.shape[-1]
    mean = h.mean(-1, keepdims=True)
    std = jnp.sqrt(jnp.sum((h - mean) ** 2, -1, keepdims=True) / (d - 1))
    h = (h - mean) / (std + 1e-8)
    return jnp.moveaxis(h, 0, 2).reshape(h.shape[1], h.shape[2], -1)


def encode(encoder: CosmosTextEncoder, prompts: Sequence[str], max_length: int) -> np.ndarray:
    """(len(prompts), max_length, num_layers * hidden) float32 prompt embeddings."""
    ids, _ = encoder.tokenizer([chat_text(encoder, p) for p in prompts], max_length)
    hidden = dl.hidden_states(encoder.model, ids, np.ones_like(ids))
    return np.asarray(normalized_layers(hidden), np.float32)
