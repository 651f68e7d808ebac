"""HunyuanVideo's prompt encoders, as the pipeline's ``encode_prompt``:

* Llama-3 (the text model of LLaVA-Llama-3-8B) on the core decoder LLM: the prompt is put into the reference
  template, tokenized to ``max_sequence_length + crop_start`` tokens (padding side and pad token from the
  tokenizer's own config, BOS from its post-processor), encoded WITH the attention mask, and ``hidden_states[-3]``
  is kept from token ``crop_start`` on, with the mask cropped alike;
* CLIP-L text (core ViT, ``kind="text"``): 77 tokens, the pooled output (final-norm EOS token).

The DiT receives ``{"hidden", "mask", "pooled"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import jax
import numpy as np

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.encoders.vit import ViTConfig, load_vit

CLIP_LENGTH = 77
HIDDEN_LAYER = -3  # hidden_states[-(num_hidden_layers_to_skip + 1)] with the pipeline's skip of 2


@dataclass
class HunyuanTextEncoder:
    llama_tokenizer: TextTokenizer
    llama: dl.DecoderLLM
    clip_tokenizer: TextTokenizer
    clip: Any


def load(ckpt: Any, *, dtype: Any, mesh: Any = None) -> HunyuanTextEncoder:
    """Both towers from a diffusers-layout checkpoint (``tokenizer``/``text_encoder``, ``tokenizer_2``/
    ``text_encoder_2``); the Llama tensor-parallel over ``mesh``'s tp axis when it has one."""
    from flax import nnx

    from vidax_core.nn.state import abstract_model, materialize
    from vidax_core.parallel import sharding

    cfg = dl.DecoderLLMConfig.from_config(ckpt.config("text_encoder"), dtype=dtype)
    graphdef, state, flat = abstract_model(lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)))
    values = dl.convert_params(cfg, ckpt.tensors("text_encoder"), flat, component="text encoder (Llama-3)")
    put = None
    if mesh is not None and mesh.size > 1:
        put = sharding.param_placer(state, mesh, dict(sharding.ENCODER_RULES))
    llama = materialize(graphdef, state, values, put=put)
    clip_cfg = ViTConfig.clip_text(ckpt.config("text_encoder_2"))
    clip = load_vit(clip_cfg, ckpt.tensors("text_encoder_2"), component="text encoder 2 (CLIP-L text)")
    return HunyuanTextEncoder(TextTokenizer.from_dir(ckpt.require("tokenizer")), llama,
                              TextTokenizer.from_dir(ckpt.require("tokenizer_2")), clip)


@jax.jit
def _clip_pooled(clip, ids):
    return clip(ids)[1]


def encode(encoder: HunyuanTextEncoder, prompts: Sequence[str], *, template: str, crop_start: int,
           max_length: int) -> dict[str, np.ndarray]:
    """``{"hidden": (N, max_length, D), "mask": (N, max_length) int32, "pooled": (N, D_clip)}`` for ``prompts``."""
    texts = [template.format(p) for p in prompts]
    ids, mask = encoder.llama_tokenizer(texts, max_length + crop_start)
    hidden, mask = dl.encode(encoder.llama, ids, mask, layers=HIDDEN_LAYER, crop_start=crop_start)
    clip_ids, _ = encoder.clip_tokenizer(list(prompts), CLIP_LENGTH)
    pooled = _clip_pooled(encoder.clip, clip_ids)
    return {"hidden": np.asarray(hidden, np.float32), "mask": np.asarray(mask, np.int32),
            "pooled": np.asarray(pooled, np.float32)}
