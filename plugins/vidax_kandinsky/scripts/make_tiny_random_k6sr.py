"""Regenerate the built-in tiny random Kandinsky 6 super-resolution checkpoint
(``src/vidax_kandinsky/assets/k6sr-tiny-random``), served as ``builtin:tiny-random`` to the ``kandinsky6-vsr*`` ids
(and to a generation id's ``options.sr_checkpoint: builtin:tiny-random``).

diffusers' own ``save_pretrained`` of the tiny ``Kandinsky6SRPipeline`` of :mod:`vidax_kandinsky.k6sr_tiny` (a
2-block NABLA DiT trained on 32-pixel tiles, a 3-level K-VAE, an x2 / x4 latent upscaler bank, flow Euler at shift
5), so it has exactly the files and key names of a real diffusers-layout checkpoint. Needs the test extra:
    python plugins/vidax_kandinsky/scripts/make_tiny_random_k6sr.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_kandinsky.k6sr_tiny import save_tiny_sr

if __name__ == "__main__":
    dest = regenerate_asset("vidax_kandinsky", lambda folder: save_tiny_sr(folder, seed=0), name="k6sr-tiny-random")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
