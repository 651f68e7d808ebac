"""HunyuanVideo-1.5's prompt encoders, as the pipelines' ``encode_prompt``:

* Qwen2.5-VL-7B's text tower on the core decoder LLM: the chat ``[system: SYSTEM_MESSAGE, user: prompt]`` (an
  empty prompt becomes ``" "``) rendered with the tokenizer's own chat template and the generation prompt, padded
  and truncated to ``max_sequence_length + 108`` tokens, encoded WITH the attention mask (positions 0..L-1);
  ``hidden_states[-3]`` and the mask are kept from token 108 on (``prompt_template_encode_start_idx``);
* byT5 (core T5 encoder, byte tokenizer) on the prompt's quoted text: every ``"..."`` or ``“...”`` substring
  (deduplicated when there are several) joined as ``Text "a". Text "b". ``, padded to ``tokenizer_2_max_length``
  (256) and encoded with its mask; a prompt without quotes gets zero states and an all-zero mask;
* image-to-video: SigLIP's last hidden state (after ``post_layernorm``) of the run's image, resized and cropped to
  the video size (:mod:`.hunyuan15_image`), the same for every guidance branch (the pipeline's ``image_embeds``).

The DiT receives ``{"hidden", "mask", "hidden_2", "mask_2"}`` and for image-to-video ``"image"`` (see
:class:`vidax_hunyuan.dit15.HunyuanDiT15`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import jax
import numpy as np

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.chat_template import load_chat_template, render_chat, special_tokens
from vidax_core.encoders.tokenizer import TextTokenizer
from vidax_core.encoders.towers import encode_t5

from . import hunyuan15_presets as presets

GLYPH = re.compile(r"\"(.*?)\"|“(.*?)”")


@dataclass
class Hunyuan15TextEncoder:
    tokenizer: TextTokenizer
    template: str
    special: dict
    qwen: dl.DecoderLLM
    byt5_tokenizer: Any  # vidax_core.encoders.byte_tokenizer.ByteTokenizer
    byt5: Any  # vidax_core.encoders.t5.T5Encoder
    vision: Any = None  # image-to-video: the SigLIP tower (vidax_core.encoders.vit.ViTEncoder)
    processor: dict | None = None  # its feature_extractor/preprocessor_config.json
    target_size: int = 640  # transformer/config.json target_size: the video size buckets


def glyph_text(prompt: str) -> str | None:
    """The byT5 input of ``prompt``: its quoted substrings as ``Text "..."`` sentences, or None without quotes."""
    found = [a or b for a, b in GLYPH.findall(prompt)]
    if len(found) > 1:
        found = list(dict.fromkeys(found))
    return ". ".join(f'Text "{t}"' for t in found) + ". " if found else None


def messages(prompt: str, system: str = presets.SYSTEM_MESSAGE) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": prompt if prompt else " "}]


def check_template(tokenizer_dir: str) -> list[str]:
    """Before any weight loads: the checkpoint's chat template loads and renders the chat."""
    from vidax_core.errors import UserError

    try:
        render_chat(load_chat_template(tokenizer_dir), messages("a test prompt"), add_generation_prompt=True,
                    special={}, where=f"{tokenizer_dir} chat template")
    except UserError as exc:
        return [str(exc)]
    return []


def load(ckpt: Any, *, dtype: Any, mesh: Any = None, i2v: bool = False) -> Hunyuan15TextEncoder:
    """Qwen (``tokenizer`` / ``text_encoder``, tensor-parallel over ``mesh``'s tp axis when it has one, in
    ``dtype``), byT5 (``tokenizer_2`` / ``text_encoder_2``, float32) and with ``i2v`` SigLIP (``image_encoder``,
    float32) with ``feature_extractor``'s preprocessing."""
    import os

    from vidax_core.encoders.t5 import T5Config, load_t5
    from vidax_core.io.checkpoint import read_json_file

    tok_dir = ckpt.require("tokenizer")
    cfg_file = os.path.join(tok_dir, "tokenizer_config.json")
    tok_cfg = read_json_file(cfg_file) if os.path.isfile(cfg_file) else {}
    cfg = dl.DecoderLLMConfig.from_config(ckpt.config("text_encoder"), dtype=dtype)
    qwen = dl.load_decoder_llm(cfg, ckpt.tensors("text_encoder"), component="text encoder (Qwen2.5-VL)", mesh=mesh)
    byt5 = load_t5(T5Config.from_config(ckpt.config("text_encoder_2")), ckpt.tensors("text_encoder_2"), mesh=mesh)
    vision = processor = None
    if i2v:
        from vidax_core.encoders.vit import ViTConfig, load_vit

        vision = load_vit(ViTConfig.siglip_vision(ckpt.config("image_encoder")), ckpt.tensors("image_encoder"),
                          component="image encoder (SigLIP)")
        processor = ckpt.config("feature_extractor")
    return Hunyuan15TextEncoder(TextTokenizer.from_dir(tok_dir), load_chat_template(tok_dir),
                                special_tokens(tok_cfg if isinstance(tok_cfg, dict) else {}), qwen,
                                TextTokenizer.from_dir(ckpt.require("tokenizer_2")), byt5, vision, processor,
                                int(ckpt.config("transformer").get("target_size", 640)))


@jax.jit
def _siglip_states(encoder, pixels):
    return encoder(pixels)[0]


def encode_image(encoder: Hunyuan15TextEncoder, image: Any) -> np.ndarray:
    """(1, tokens, hidden) SigLIP states of ``image`` (a PIL image) as the pipeline's ``encode_image``."""
    from .hunyuan15_image import resize_crop, siglip_pixels, video_size

    cropped = resize_crop(image, *video_size(image, encoder.target_size))
    return np.asarray(_siglip_states(encoder.vision, siglip_pixels(cropped, encoder.processor)), np.float32)


def encode_qwen(encoder: Hunyuan15TextEncoder, prompts: Sequence[str], *, max_length: int,
                crop_start: int = presets.CROP_START, layer: int = presets.HIDDEN_LAYER):
    """``(hidden (N, max_length, D), mask (N, max_length) int32)``, the pipeline's ``_get_mllm_prompt_embeds``."""
    texts = [render_chat(encoder.template, messages(p), add_generation_prompt=True, special=encoder.special)
             for p in prompts]
    ids, mask = encoder.tokenizer(texts, max_length + crop_start)
    hidden, mask = dl.encode(encoder.qwen, ids, mask, layers=layer, crop_start=crop_start)
    return np.asarray(hidden, np.float32), np.asarray(mask, np.int32)


def encode_byt5(encoder: Hunyuan15TextEncoder, prompts: Sequence[str], *, max_length: int):
    """``(hidden (N, max_length, d_model), mask (N, max_length) int32)``, the pipeline's
    ``_get_byt5_prompt_embeds``: zeros for a prompt without quoted text."""
    d = encoder.byt5.cfg.d_model
    hidden = np.zeros((len(prompts), max_length, d), np.float32)
    mask = np.zeros((len(prompts), max_length), np.int32)
    glyphs = [(i, glyph_text(p)) for i, p in enumerate(prompts)]
    glyphs = [(i, g) for i, g in glyphs if g is not None]
    if glyphs:
        ids, m = encoder.byt5_tokenizer([g for _, g in glyphs], max_length)
        states = encode_t5(encoder.byt5, ids, m)  # jitted, or streamed layer chunks
        rows = [i for i, _ in glyphs]
        hidden[rows], mask[rows] = states, m
    return hidden, mask


def encode(encoder: Hunyuan15TextEncoder, prompts: Sequence[str], *, max_length: int = presets.QWEN_LENGTH,
           byt5_length: int = presets.BYT5_LENGTH) -> dict[str, np.ndarray]:
    hidden, mask = encode_qwen(encoder, prompts, max_length=max_length)
    hidden_2, mask_2 = encode_byt5(encoder, prompts, max_length=byt5_length)
    return {"hidden": hidden, "mask": mask, "hidden_2": hidden_2, "mask_2": mask_2}


def encode_for_run(encoder: Hunyuan15TextEncoder, prompts: Sequence[str], run: Any) -> dict[str, np.ndarray]:
    """The run's prompts: ``sampling.max_sequence_length`` Qwen tokens, ``options.tokenizer_2_max_length`` bytes."""
    byt5 = run.options.get("tokenizer_2_max_length")
    out = encode(encoder, prompts, max_length=int(run.sampling.max_sequence_length),
                 byt5_length=presets.BYT5_LENGTH if byt5 is None else int(byt5))
    if encoder.vision is not None:
        from vidax_core.io.image import load_image

        image = encode_image(encoder, load_image(run.image))
        out["image"] = np.repeat(image, len(prompts), axis=0)
    return out
