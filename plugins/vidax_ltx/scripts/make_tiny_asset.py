"""Regenerate the tiny random-weight LTX-Video checkpoint that ships in vidax-ltx (``builtin:tiny-random``).

Written by diffusers' own ``save_pretrained`` (an LTXConditionPipeline: T5 v1.1 text encoder with a tiny
SentencePiece tokenizer, LTX DiT, 0.9.8-layout VAE with a timestep-conditioned decoder, the 0.9.8 repositories'
flow-match Euler scheduler without dynamic shift) plus a tiny ``latent_upsampler/`` for the multi-scale recipe, so
it has exactly the files and key names of a real diffusers-layout LTX-Video checkpoint. Needs the test extra:
    python plugins/vidax_ltx/scripts/make_tiny_asset.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_core.testing.tiny.ltx import random_ltx_upsampler, save_tiny_ltx

if __name__ == "__main__":
    def write(dest: str) -> None:
        save_tiny_ltx(dest, kind="condition", seed=0)
        random_ltx_upsampler(seed=11).save_pretrained(os.path.join(dest, "latent_upsampler"), safe_serialization=True)

    regenerate_asset("vidax_ltx", write)
