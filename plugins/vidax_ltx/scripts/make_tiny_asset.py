"""Regenerate the tiny random-weight LTX-Video checkpoint that ships in vidax-ltx (``builtin:tiny-random``).

Written by diffusers' own ``save_pretrained`` (an LTXConditionPipeline: T5 v1.1 text encoder with a tiny
SentencePiece tokenizer, LTX DiT, 0.9.8-layout VAE with a timestep-conditioned decoder, the 0.9.8 repositories'
flow-match Euler scheduler without dynamic shift) plus a tiny ``latent_upsampler/`` for the multi-scale recipe, so
it has exactly the files and key names of a real diffusers-layout LTX-Video checkpoint. Needs the test extra:
    python plugins/vidax_ltx/scripts/make_tiny_asset.py
"""

import os
import shutil

from vidax_core.testing.tiny.ltx import random_ltx_upsampler, save_tiny_ltx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

DEST = os.path.join(ROOT, "plugins", "vidax_ltx", "src", "vidax_ltx", "assets", "tiny-random")

if __name__ == "__main__":
    shutil.rmtree(DEST, ignore_errors=True)
    save_tiny_ltx(DEST, kind="condition", seed=0)
    random_ltx_upsampler(seed=11).save_pretrained(os.path.join(DEST, "latent_upsampler"), safe_serialization=True)
    print(f"wrote {DEST}")
