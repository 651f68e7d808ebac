"""Regenerate the built-in tiny random Kandinsky 5 checkpoint (``src/vidax_kandinsky/assets/tiny-random``), served
as ``builtin:tiny-random`` to every ``kandinsky5-*`` id.

diffusers' own ``save_pretrained`` of the tiny ``Kandinsky5T2VPipeline`` of :mod:`vidax_kandinsky.tiny` (tiny
Qwen2.5-VL and CLIP text with their tokenizers, a narrow 2 + 2 block DiT with ``visual_cond``, the tiny HunyuanVideo
VAE, flow Euler at shift 5), so it has exactly the files and key names of a real diffusers-layout checkpoint. An
I2V run on it works too (the same DiT layout). Needs the test extra:
    python plugins/vidax_kandinsky/scripts/make_tiny_random.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_kandinsky.tiny import save_tiny_kandinsky

# narrower than the parity tests' DiT (head size 8, 4 heads), so the folder stays small
DIT = dict(model_dim=32, ff_dim=48, axes_dims=(2, 2, 4))

if __name__ == "__main__":
    dest = regenerate_asset("vidax_kandinsky", lambda folder: save_tiny_kandinsky(folder, "t2v", seed=0, dit=DIT))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
