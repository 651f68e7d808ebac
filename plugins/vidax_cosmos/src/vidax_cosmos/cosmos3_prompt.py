"""Cosmos3's prompt tokens, as ``Cosmos3OmniPipeline.tokenize_prompt`` makes them (there is no text encoder: the ids
index the DiT's embedding table).

1. Metadata sentences: for a video (``num_frames > 1``) the duration sentence (``num_frames / fps`` seconds at
   ``fps``) when ``add_duration_template``, then the resolution sentence when ``add_resolution_template``; the
   negative prompt gets the inverse sentences ("is not ..."). Each is appended as ``base.rstrip(".") + ". " +
   sentence`` (just the sentence when the base is empty).
2. Chat: an optional system turn (the video or image system prompt; ``use_system_prompt``, by default the
   checkpoint's ``default_use_system_prompt``) and the user turn with the text as plain string content, rendered with
   the tokenizer's own chat template WITH the generation prompt, tokenized without added special tokens.
3. The end-of-text token (``eos_token`` of tokenizer_config.json) and ``<|vision_start|>`` are appended.

No padding and no truncation, as the reference; ``sampling.max_sequence_length`` caps the count by dropping chat
tokens from the end (the two closing tokens are kept), so a cap above the prompt's length changes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from vidax_core.encoders.chat_template import load_chat_template, render_chat, special_tokens
from vidax_core.errors import UserError
from vidax_core.io.checkpoint import read_json_file

from . import cosmos3_presets as P


@dataclass
class Cosmos3Tokenizer:
    tokenizer: object  # tokenizers.Tokenizer
    template: str
    special: dict
    closing: tuple[int, int]  # (end of text, start of generation) ids
    default_use_system_prompt: bool = True
    where: str = "text_tokenizer"


def load(folder: str, model_index: dict | None = None) -> Cosmos3Tokenizer:
    """The checkpoint's ``text_tokenizer/`` folder (tokenizer.json, tokenizer_config.json, chat template)."""
    from vidax_core.encoders.tokenizer import TextTokenizer

    tok = TextTokenizer.from_dir(folder).tokenizer
    cfg_file = os.path.join(folder, "tokenizer_config.json")
    cfg = read_json_file(cfg_file) if os.path.isfile(cfg_file) else {}
    cfg = cfg if isinstance(cfg, dict) else {}
    special = special_tokens(cfg)
    eos = special.get("eos_token")
    ids = []
    for what, token in (("eos_token", eos), ("start of generation", P.START_OF_GENERATION)):
        i = tok.token_to_id(token) if isinstance(token, str) else None
        if i is None:
            raise UserError(f"{folder}: the tokenizer has no {what} token {token!r}, which Cosmos3 appends to every "
                            "prompt: use the checkpoint's own text_tokenizer folder")
        ids.append(int(i))
    use_sys = (model_index or {}).get("default_use_system_prompt", True)
    return Cosmos3Tokenizer(tok, load_chat_template(folder), special, (ids[0], ids[1]), bool(use_sys), folder)


def _append(base: str, addition: str) -> str:
    base = base.rstrip(".")
    return f"{base}. {addition}" if base else addition


def templated(text: str, *, negative: bool, num_frames: int, height: int, width: int, fps: float,
              add_resolution: bool, add_duration: bool) -> str:
    """``text`` with the pipeline's metadata sentences (inverse ones when ``negative``)."""
    is_image = num_frames == 1
    if not is_image and add_duration:
        t = P.INVERSE_DURATION if negative else P.DURATION
        text = _append(text, t.format(duration=num_frames / fps, fps=fps))
    if add_resolution:
        if is_image:
            t = P.INVERSE_IMAGE_RESOLUTION if negative else P.IMAGE_RESOLUTION
        else:
            t = P.INVERSE_VIDEO_RESOLUTION if negative else P.VIDEO_RESOLUTION
        text = _append(text, t.format(height=height, width=width))
    return text


def chat_text(tok: Cosmos3Tokenizer, text: str, *, use_system_prompt: bool, is_image: bool) -> str:
    messages = []
    if use_system_prompt:
        messages.append({"role": "system", "content": P.SYSTEM_PROMPT_IMAGE if is_image else P.SYSTEM_PROMPT_VIDEO})
    messages.append({"role": "user", "content": text})
    return render_chat(tok.template, messages, add_generation_prompt=True, special=tok.special, add_vision_id=False,
                       where=f"{tok.where} chat template")


def token_ids(tok: Cosmos3Tokenizer, text: str, *, negative: bool, run) -> np.ndarray:
    """(1, L) int32 ids of one guidance branch's prompt for ``run`` (its sampling sizes and options)."""
    s, o = run.sampling, run.options
    fps = float(o.get("fps", 24.0))
    use_sys = o.get("use_system_prompt")
    use_sys = tok.default_use_system_prompt if use_sys is None else bool(use_sys)
    full = templated(text or "", negative=negative, num_frames=int(s.num_frames), height=int(s.height),
                     width=int(s.width), fps=fps, add_resolution=bool(o.get("add_resolution_template", True)),
                     add_duration=bool(o.get("add_duration_template", True)))
    chat = chat_text(tok, full, use_system_prompt=use_sys, is_image=int(s.num_frames) == 1)
    tok.tokenizer.no_padding()
    tok.tokenizer.no_truncation()
    ids = list(tok.tokenizer.encode(chat, add_special_tokens=False).ids)
    cap = int(s.max_sequence_length)
    ids = ids[:max(cap - 2, 0)] + list(tok.closing)
    return np.asarray(ids, np.int32)[None, :]


def check_template(folder: str) -> list[str]:
    """Before any weight loads: the tokenizer folder loads and its chat template renders a prompt."""
    try:
        tok = load(folder)
        chat_text(tok, "a test prompt", use_system_prompt=True, is_image=False)
    except UserError as exc:
        return [str(exc)]
    return []
