"""HunyuanVideo's prompt encoders, as the pipeline's ``encode_prompt``:

* Llama-3 (the text model of LLaVA-Llama-3-8B) on the core decoder LLM: the prompt is put into the reference
  template, tokenized to ``max_sequence_length + crop_start`` tokens (padding side and pad token from the
  tokenizer's own config, BOS from its post-processor), encoded WITH the attention mask, and ``hidden_states[-3]``
  is kept from token ``crop_start`` on, with the mask cropped alike;
* CLIP-L text (the core's ``clip_text`` tower): 77 tokens, the pooled output (final-norm EOS token).

Both towers load and encode through the core's public tower calls (:mod:`vidax_core.encoders.towers`).

The DiT receives ``{"hidden", "mask", "pooled"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vidax_core import TextTokenizer, encode_llm, encode_vit, load_llm, load_tokenizer, load_vit_tower

CLIP_LENGTH = 77
HIDDEN_LAYER = -3  # hidden_states[-(num_hidden_layers_to_skip + 1)] with the pipeline's skip of 2


@dataclass
class HunyuanTextEncoder:
    llama_tokenizer: TextTokenizer
    llama: Any  # vidax_core.DecoderLLM
    clip_tokenizer: TextTokenizer
    clip: Any


def load(ckpt: Any, *, dtype: Any, mesh: Any = None) -> HunyuanTextEncoder:
    """Both towers from a diffusers-layout checkpoint (``tokenizer``/``text_encoder``, ``tokenizer_2``/
    ``text_encoder_2``); the Llama tensor-parallel over ``mesh``'s tp axis when it has one."""
    llama = load_llm(ckpt, "text_encoder", dtype=dtype, mesh=mesh, label="text encoder (Llama-3)")
    clip = load_vit_tower(ckpt, "text_encoder_2", "clip_text", label="text encoder 2 (CLIP-L text)")
    return HunyuanTextEncoder(load_tokenizer(ckpt, "tokenizer"), llama, load_tokenizer(ckpt, "tokenizer_2"), clip)


def _clip_pooled(clip, ids):
    return encode_vit(clip, ids)[1]


def encode(encoder: HunyuanTextEncoder, prompts: Sequence[str], *, template: str, crop_start: int,
           max_length: int) -> dict[str, np.ndarray]:
    """``{"hidden": (N, max_length, D), "mask": (N, max_length) int32, "pooled": (N, D_clip)}`` for ``prompts``."""
    texts = [template.format(p) for p in prompts]
    ids, mask = encoder.llama_tokenizer(texts, max_length + crop_start)
    hidden, mask = encode_llm(encoder.llama, ids, mask, layers=HIDDEN_LAYER, crop_start=crop_start)
    clip_ids, _ = encoder.clip_tokenizer(list(prompts), CLIP_LENGTH)
    return {"hidden": hidden, "mask": mask, "pooled": _clip_pooled(encoder.clip, clip_ids)}


# --------------------------------------------------------------------------------------------------------------
# Image-to-video: the full LLaVA (image tokens interleaved with the templated prompt)
# --------------------------------------------------------------------------------------------------------------


@dataclass
class HunyuanI2VTextEncoder:
    llama_tokenizer: TextTokenizer
    llava: Any
    clip_tokenizer: TextTokenizer
    clip: Any
    end_header_id: int
    image_size: int
    crop_size: int
    mean: tuple
    std: tuple


@dataclass(frozen=True)
class I2VTemplate:
    """diffusers' I2V ``prompt_template`` dict: the text, ``crop_start`` and where the image features sit."""

    template: str
    crop_start: int
    image_emb_start: int
    image_emb_end: int
    image_emb_len: int


def load_i2v(ckpt: Any, *, dtype: Any, mesh: Any = None) -> HunyuanI2VTextEncoder:
    """LLaVA (``text_encoder``), its CLIP image preprocessing (``image_processor``), CLIP-L text."""
    from vidax_core.encoders import llava as lv
    from vidax_core.parallel import sharding

    cfg = lv.LlavaConfig.from_config(ckpt.config("text_encoder"), dtype=dtype)
    put = None
    if mesh is not None and mesh.size > 1:
        from flax import nnx

        from vidax_core.nn.state import abstract_model

        _, state, _ = abstract_model(lambda: lv.LlavaEncoder(cfg, rngs=nnx.Rngs(0)))
        put = sharding.param_placer(state, mesh, dict(sharding.ENCODER_RULES))
    llava = lv.load_llava(cfg, ckpt.tensors("text_encoder"), put=put)
    proc = ckpt.config("image_processor")
    size = proc.get("size", {})
    size = size.get("shortest_edge", size.get("height")) if isinstance(size, dict) else size
    crop = proc.get("crop_size", size)
    crop = crop.get("height", size) if isinstance(crop, dict) else crop
    from vidax_core.encoders.clip_vision import CLIP_MEAN, CLIP_STD

    tok = load_tokenizer(ckpt, "tokenizer")
    end_header = tok.tokenizer.token_to_id("<|end_header_id|>")
    clip = load_vit_tower(ckpt, "text_encoder_2", "clip_text", label="text encoder 2 (CLIP-L text)")
    return HunyuanI2VTextEncoder(tok, llava, load_tokenizer(ckpt, "tokenizer_2"), clip,
                                 -1 if end_header is None else int(end_header), int(size), int(crop),
                                 tuple(proc.get("image_mean", CLIP_MEAN)), tuple(proc.get("image_std", CLIP_STD)))


def expand_image_tokens(ids: np.ndarray, max_length: int, image_token: int, tpl: I2VTemplate, pad_id: int):
    """The pipeline's ``_expand_input_ids_with_image_tokens``: each image placeholder becomes ``image_emb_len``
    tokens, positions ``image_emb_start:image_emb_end`` are image tokens, the mask is ``ids != pad`` and the
    position ids count the unmasked tokens (1 where masked)."""
    special = ids == image_token
    n_special = special.sum(-1)
    total = max_length + int(n_special.max()) * (tpl.image_emb_len - 1)
    new_pos = np.cumsum(special * (tpl.image_emb_len - 1) + 1, axis=-1) - 1
    out = np.full((ids.shape[0], total), pad_id, ids.dtype)
    for b in range(ids.shape[0]):
        keep = ~special[b]
        out[b, new_pos[b, keep]] = ids[b, keep]
    out[:, tpl.image_emb_start:tpl.image_emb_end] = image_token
    mask = (out != pad_id).astype(np.int32)
    pos = np.where(mask == 0, 1, np.cumsum(mask, -1) - 1)
    return out, mask, pos


def encode_i2v(encoder: HunyuanI2VTextEncoder, prompt: str, image: Any, *, tpl: I2VTemplate, max_length: int,
               interleave: int) -> dict[str, np.ndarray]:
    """One prompt with its image, as the I2V pipeline's ``encode_prompt`` (batch 1): image features (every
    ``interleave``-th) then the cropped prompt tokens without the assistant header, and their masks."""
    from vidax_core.encoders import llava as lv
    from vidax_core.encoders.clip_vision import preprocess_images

    tok = encoder.llama_tokenizer
    total = max_length + tpl.crop_start
    ids, mask = tok([tpl.template.format(prompt)], total)
    image_token = encoder.llava.cfg.image_token_id
    exp_ids, exp_mask, pos = expand_image_tokens(ids, total, image_token, tpl, tok.pad_id)
    pixels = preprocess_images([image], encoder.image_size, encoder.crop_size, encoder.mean, encoder.std)
    hidden = np.asarray(lv.hidden_states(encoder.llava, exp_ids, exp_mask, pixels, pos)[HIDDEN_LAYER], np.float32)[0]
    ends = np.flatnonzero(ids[0] == encoder.end_header_id)
    if len(ends) == 2:  # the assistant header was truncated away: the reference takes the last position
        ends = np.append(ends, ids.shape[1] - 1)
    a_start = int(ends[-1]) + 1
    text_crop = tpl.crop_start - 1 + tpl.image_emb_len
    text = np.concatenate([hidden[text_crop:a_start - 1 + tpl.image_emb_len - 4],
                           hidden[a_start - 1 + tpl.image_emb_len:]])
    text_mask = np.concatenate([mask[0, tpl.crop_start:a_start - 4], mask[0, a_start:]])
    img = hidden[tpl.image_emb_start:tpl.image_emb_end]
    img_mask = np.ones(img.shape[0], np.int32)
    if 0 < interleave < 6:
        img, img_mask = img[::interleave], img_mask[::interleave]
    clip_ids, _ = encoder.clip_tokenizer([prompt], CLIP_LENGTH)
    pooled = _clip_pooled(encoder.clip, clip_ids)
    return {"hidden": np.concatenate([img, text])[None].astype(np.float32),
            "mask": np.concatenate([img_mask, text_mask.astype(np.int32)])[None],
            "pooled": np.asarray(pooled, np.float32)}


def encode_for_run(encoder: Any, prompts: Sequence[str], run: Any, i2v: bool):
    """The run's prompts with its options (template, crop) for text-to-video, or with its image for I2V."""
    from . import presets

    o = run.options
    if i2v:
        return _encode_i2v(encoder, prompts, run)
    template = o.get("prompt_template") or presets.T2V_TEMPLATE
    crop = o.get("crop_start")
    crop = presets.T2V_CROP_START if crop is None else int(crop)
    return encode(encoder, prompts, template=template, crop_start=crop,
                  max_length=int(run.sampling.max_sequence_length))


def _encode_i2v(encoder, prompts, run):
    """The prompt with the run's image (``image_embed_interleave``), the negative prompt with a black image of the
    run's size and interleave 2, as the pipeline; one context per prompt (their lengths differ)."""
    from PIL import Image

    from vidax_core.io.image import load_image

    from . import presets

    o, s = run.options, run.sampling
    start, end, length = presets.I2V_IMAGE_EMB
    start = start if o.get("image_emb_start") is None else int(o["image_emb_start"])
    length = length if o.get("image_emb_len") is None else int(o["image_emb_len"])
    tpl = I2VTemplate(o.get("prompt_template") or presets.I2V_TEMPLATE,
                      presets.I2V_CROP_START if o.get("crop_start") is None else int(o["crop_start"]),
                      start, start + length, length)
    images = [load_image(run.image), Image.new("RGB", (s.width, s.height), 0)]
    interleave = [int(o.get("image_embed_interleave") or 4), 2]
    return [encode_i2v(encoder, p, images[i], tpl=tpl, max_length=int(s.max_sequence_length),
                       interleave=interleave[i]) for i, p in enumerate(prompts)]
