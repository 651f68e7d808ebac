"""Regenerate the tiny random-weight CogVideoX checkpoint that ships in vidax-cogvideox (``builtin:tiny-random``).

Written by diffusers' own ``save_pretrained`` (a CogVideoXPipeline: T5 v1.1 text encoder with a tiny SentencePiece
tokenizer, a 5B-like DiT with 3-D RoPE, a CogVideoX VAE, the hub's CogVideoX DDIM scheduler config), so it has
exactly the files and key names of a real diffusers-layout CogVideoX checkpoint. Needs the test extra:
    python plugins/vidax_cogvideox/scripts/make_tiny_asset.py
"""

from vidax_core.testing.assets import regenerate_asset
from vidax_core.testing.tiny.cogvideox import save_tiny_cogvideox

if __name__ == "__main__":
    regenerate_asset("vidax_cogvideox", lambda dest: save_tiny_cogvideox(dest, variant="5b", seed=0))
