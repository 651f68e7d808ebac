"""LTX-2.x prompt encoding, as LTX2Pipeline does it (``encode_prompt``, then ``connectors`` in ``__call__``).

1. Gemma tokenization: each prompt stripped, LEFT-padded (the pipeline forces ``padding_side = "left"`` whatever
   the tokenizer folder says) and truncated to ``max_sequence_length`` (1024), special tokens added (Gemma's BOS).
2. Gemma (the core :class:`~vidax_core.encoders.decoder_llm.DecoderLLM` as Gemma-3's text tower for LTX-2.0 / 2.3,
   Gemma-4 unified's for 2.5, as the checkpoint's config.json says) with that mask: every hidden state, embeddings
   first and the last one after the final norm, stacked to (B, S, D, L).
3. The connectors (:class:`~vidax_ltx.ltx2_connectors.LTX2TextConnectors`, told the padding side): the DiT's
   ``{"video": (B, S, Cv), "audio": (B, S, Ca)}`` text streams, padding replaced by registers, no mask.

Checkpoint components (diffusers layout): ``tokenizer/``, ``text_encoder/`` (Gemma3ForConditionalGeneration or
Gemma4UnifiedForConditionalGeneration; vision and audio parts are ignored), ``connectors/``. Gemma's hidden states
stay float32 into the feature statistics (the reference casts them to the encoder's dtype first); the projections
and connectors run in their dtype.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.tokenizer import TextTokenizer

from .ltx2_connectors import LTX2ConnectorsConfig, LTX2TextConnectors, load_connectors

MAX_SEQUENCE_LENGTH = 1024
PADDING_SIDE = "left"


@dataclasses.dataclass
class LTX2TextEncoder:
    tokenizer: TextTokenizer
    gemma: dl.DecoderLLM
    connectors: LTX2TextConnectors


def load(ckpt: Any, *, dtype: Any = jnp.bfloat16, mesh: Any = None) -> LTX2TextEncoder:
    """Tokenizer, Gemma (in ``dtype``, tensor-parallel over ``mesh``'s tp axis when it has one) and the connectors
    (in ``dtype``) from a diffusers-layout checkpoint."""
    cfg = dl.DecoderLLMConfig.from_config(ckpt.config("text_encoder"), dtype=dtype)
    gemma = dl.load_decoder_llm(cfg, ckpt.tensors("text_encoder"), component="text encoder (Gemma)", mesh=mesh)
    connectors = load_connectors(LTX2ConnectorsConfig.from_config(ckpt.config("connectors"), dtype=dtype),
                                 ckpt.tensors("connectors"))
    # an original release may pack the tokenizer into its Gemma file
    # (:meth:`.ltx2_release.LTX2ReleaseCheckpoint.open_tokenizer`)
    opener = getattr(ckpt, "open_tokenizer", None)
    tokenizer = opener() if opener is not None else TextTokenizer.from_dir(ckpt.require("tokenizer"))
    return LTX2TextEncoder(tokenizer, gemma, connectors)


def tokenize(tokenizer: TextTokenizer, prompts: Sequence[str], max_length: int = MAX_SEQUENCE_LENGTH
             ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) int32 (B, max_length) as ``_get_gemma_prompt_embeds`` tokenizes: stripped, left-padded."""
    left = dataclasses.replace(tokenizer, padding_side=PADDING_SIDE)
    return left([p.strip() for p in prompts], max_length)


def gemma_hidden_states(gemma: dl.DecoderLLM, ids: Any, mask: Any) -> jax.Array:
    """Every hidden state of ``gemma`` for the tokens, stacked last: (B, S, D, layers + 1) float32."""
    return jnp.moveaxis(dl.hidden_states(gemma, ids, mask), 0, -1)


@functools.partial(jax.jit, static_argnums=(0, 4))
def _connect(graphdef, state, hidden, mask, padding_side):
    return nnx.merge(graphdef, state)(hidden, mask, padding_side)


def connect(connectors: LTX2TextConnectors, hidden: Any, mask: Any, padding_side: str = PADDING_SIDE
            ) -> dict[str, jax.Array]:
    """``connectors(hidden, mask, padding_side)`` compiled once per graph, shapes and padding side."""
    graphdef, state = nnx.split(connectors)
    return _connect(graphdef, state, jnp.asarray(hidden), jnp.asarray(mask, jnp.int32), padding_side)


def encode_prompt(encoder: LTX2TextEncoder, prompts: Sequence[str], *,
                  max_sequence_length: int = MAX_SEQUENCE_LENGTH) -> dict[str, np.ndarray]:
    """The DiT's text context for ``prompts``: ``{"video": (B, S, Cv), "audio": (B, S, Ca)}`` float32, what
    LTX2Pipeline passes as ``encoder_hidden_states`` / ``audio_encoder_hidden_states`` (S = ``max_sequence_length``).
    The pipeline encodes the negative prompts (``""`` by default) the same way, as their own batch."""
    ids, mask = tokenize(encoder.tokenizer, prompts, max_sequence_length)
    hidden = gemma_hidden_states(encoder.gemma, ids, mask)
    out = connect(encoder.connectors, hidden, mask, PADDING_SIDE)
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


__all__ = ["LTX2TextEncoder", "MAX_SEQUENCE_LENGTH", "connect", "encode_prompt", "gemma_hidden_states", "load",
           "tokenize"]
