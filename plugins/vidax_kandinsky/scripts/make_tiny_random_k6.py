"""Regenerate the built-in tiny random Kandinsky 6 checkpoint (``src/vidax_kandinsky/assets/k6-tiny-random``),
served as ``builtin:tiny-random`` to every ``kandinsky6-*`` id.

diffusers' own ``save_pretrained`` of the tiny ``Kandinsky6TI2VAPipeline`` of :mod:`vidax_kandinsky.k6_tiny` (Kandinsky
5's tiny Qwen2.5-VL and CLIP text with their tokenizers, a narrow 2 + 2 block fused DiT with the released flags,
the tiny HunyuanVideo VAE, a tiny MMAudio VAE and vocoder, flow Euler at shift 5), so it has exactly the files and
key names of a real diffusers-layout checkpoint; image-to-video runs on it too. Needs the test extra:
    python plugins/vidax_kandinsky/scripts/make_tiny_random_k6.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_kandinsky.k6_tiny import save_tiny_k6

if __name__ == "__main__":
    dest = regenerate_asset("vidax_kandinsky", lambda folder: save_tiny_k6(folder, seed=0), name="k6-tiny-random")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
