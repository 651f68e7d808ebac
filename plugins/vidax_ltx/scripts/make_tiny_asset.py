"""Regenerate the tiny random-weight LTX-Video checkpoint that ships in vidax-ltx (``builtin:tiny-random``).

Written by diffusers' own ``save_pretrained`` (an LTXPipeline: T5 v1.1 text encoder with a tiny SentencePiece
tokenizer, LTX DiT, 0.9.8-layout VAE with a timestep-conditioned decoder, flow-match Euler scheduler), so it has
exactly the files and key names of a real diffusers-layout LTX-Video checkpoint. Needs the test extra:
    python plugins/vidax_ltx/scripts/make_tiny_asset.py
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "testing"))

from vidax_testing.tiny_ltx import save_tiny_ltx  # noqa: E402

DEST = os.path.join(ROOT, "plugins", "vidax_ltx", "src", "vidax_ltx", "assets", "tiny-random")

if __name__ == "__main__":
    shutil.rmtree(DEST, ignore_errors=True)
    save_tiny_ltx(DEST, kind="t2v", seed=0)
    print(f"wrote {DEST}")
