"""Regenerate the built-in tiny random Motif-Video checkpoint (``src/vidax_motif/assets/tiny-random``), served as
``builtin:tiny-random`` to ``motif-video-2b``.

diffusers' own ``save_pretrained`` of the tiny ``MotifVideoPipeline`` of :mod:`vidax_motif.tiny` (a tiny
T5Gemma2 encoder with its SigLIP tower and the tiny Gemma-style tokenizer, a DiT with every stage: one dual block,
two single blocks with the text cross-attention, one DDT decoder block, the image projection; the tiny Wan VAE, the
published recipe's adaptive projected guidance, flow Euler with a dynamic shift, the SigLIP image processor), so it
has exactly the files and key names of a real diffusers-layout checkpoint; image-to-video runs on it too. Needs the
test extra:
    python plugins/vidax_motif/scripts/make_tiny_random.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_motif.tiny import save_tiny_motif

if __name__ == "__main__":
    dest = regenerate_asset("vidax_motif", lambda folder: save_tiny_motif(folder, "t2v", seed=0))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
