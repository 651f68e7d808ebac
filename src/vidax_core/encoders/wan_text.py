"""The Wan pipelines' prompt encoding, shared by the families that copy it (Wan, SkyReels-V2, Helios): the
reference's prompt cleaning, then UMT5-XXL in the run's encoder dtype with the mask, the padding zeroed
(:func:`vidax_core.encode_text`)."""

from __future__ import annotations

import numpy as np

from vidax_core.encoders.prompt_clean import prompt_clean


def encode(text, prompts, max_len: int) -> np.ndarray:
    """``text`` is the :class:`vidax_core.T5Text` of ``load_t5_text(ckpt, mesh, model_type="umt5")``."""
    from vidax_core import encode_text

    ids, mask = text.tokenizer([prompt_clean(p) for p in prompts], max_len)
    return np.asarray(encode_text(text.encoder, ids, mask, max_len), np.float32)


class WanTextHooks:
    """The prompt hooks of a family whose checkpoint holds the Wan pipelines' UMT5 text encoder and tokenizer
    (Wan, SkyReels-V2, Helios): mixed in before :class:`vidax_core.FamilyPlugin`, as
    :class:`vidax_core.vae.wan_hooks.WanVAEHooks` is. Importing it imports no JAX."""

    def build_text_encoder(self, spec, ckpt, run, mesh):
        from vidax_core import load_t5_text

        return load_t5_text(ckpt, mesh, model_type="umt5")

    def encode_prompt(self, spec, encoder, prompts, run):
        return encode(encoder, prompts, run.sampling.max_sequence_length)
