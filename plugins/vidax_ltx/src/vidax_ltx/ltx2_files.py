"""LTX-2.x single files (a ComfyUI models folder's, or ``model.files``) read as one
:class:`~vidax_ltx.ltx2_release.LTX2ReleaseCheckpoint` (the plugin's ``open_files`` hook).

LTX-2.0 as ComfyUI runs it (``ltx-2-19b-dev`` ids; the files the core found with the id's ``comfy_files``)::

    checkpoints/ltx-2-19b-dev.safetensors (or -fp8)   Lightricks' release file: DiT, text connectors and their input
                                                      projection, video VAE, audio VAE, vocoder (ltx-core's names)
    text_encoders/gemma_3_12B_it.safetensors          Comfy-Org's Gemma-3 12B (transformers' language model under
       (or _fp8_scaled)                               ``model.*``, the vision tower, its SentencePiece ``spiece_model``)

The DiT file serves every part no other file is named for (``vae``, ``audio_vae``). The Gemma file's config is the
id's published one with its sizes read from the tensors, its tokenizer the SentencePiece model it carries (or
``model.files.tokenizer``). LTX-2.5's per-part files (``model.files``: transformer, text_encoder, vae, audio_vae) read
the same way, their configs from the files' metadata as in the release folder.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from vidax_core.encoders.llm_config import is_decoder_llm
from vidax_core.errors import UserError

from .ltx2_release import LTX2ReleaseCheckpoint


def open_files(spec: Any, files: Mapping[str, str], base: Any) -> LTX2ReleaseCheckpoint | None:
    """The run's LTX-2.x checkpoint of ``files`` (component -> path; configs the files lack from ``base``); None
    for files without the DiT (``model.files.tokenizer`` over a folder: the folder's checkpoint reads the rest)."""
    if "transformer" not in files:
        return None
    dit = files["transformer"]
    parts = {"transformer": dit, "text_encoder": files["text_encoder"], "vae": files.get("vae", dit),
             "audio_vae": files.get("audio_vae", dit)}
    ckpt = LTX2ReleaseCheckpoint(os.path.dirname(dit), parts, base=base, tokenizer=files.get("tokenizer"))
    if not is_decoder_llm(ckpt.read_tensors("text_encoder")):  # e.g. the only file of text_encoders/, another's
        raise UserError(f"{os.path.basename(parts['text_encoder'])} (text_encoder) holds no Gemma language model "
                        f"(model.layers.*), which {spec.id} reads: add Comfy-Org's text_encoders/"
                        "gemma_3_12B_it.safetensors (or _fp8_scaled) or name it with model.files.text_encoder")
    if not len(ckpt.read_tensors("audio_vae")):
        raise UserError(f"{os.path.basename(parts['audio_vae'])} holds no audio VAE (audio_vae.* tensors), which "
                        f"{spec.id} needs: name its file with model.files.audio_vae")
    return ckpt
