"""Regenerate the built-in tiny random HunyuanVideo checkpoint (``src/vidax_hunyuan/assets/tiny-random``).

Run from the repository root with the test extra installed:
``python plugins/vidax_hunyuan/scripts/make_tiny_random.py``.
It is diffusers' own ``save_pretrained`` of the tiny ``HunyuanVideoPipeline`` of ``vidax_core.testing.tiny.hunyuan``.
"""

from __future__ import annotations

import os
import shutil

from vidax_core.testing.tiny.hunyuan import save_tiny_hunyuan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

OUT = os.path.join(ROOT, "plugins", "vidax_hunyuan", "src", "vidax_hunyuan", "assets", "tiny-random")

if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    # A narrower DiT than the parity tests use (head dim 8), so the folder stays under 2 MB.
    save_tiny_hunyuan(OUT, seed=0, dit=dict(attention_head_dim=8, rope_axes_dim=(2, 2, 4)))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT} ({total / 1e6:.2f} MB)")
