"""Regenerate the built-in tiny random SANA-Video checkpoint (``src/vidax_sana_video/assets/tiny-random``), served as
``builtin:tiny-random`` to ``sana-video-2b-480p``.

diffusers' own ``save_pretrained`` of the tiny ``SanaVideoPipeline`` of :mod:`vidax_sana_video.tiny` (a tiny Gemma-2
with the trained tiny tokenizer, a 2-block DiT at 480p's sample_size, the core's tiny Wan VAE, DPM-Solver++ on flow
sigmas at shift 8), so it has exactly the files and key names of a real diffusers-layout checkpoint; image-to-video
runs on it too. Needs the test extra:
    python plugins/vidax_sana_video/scripts/make_tiny_random.py
"""

import os

from vidax_core.testing.assets import regenerate_asset
from vidax_sana_video.tiny import save_tiny_sana_video

if __name__ == "__main__":
    dest = regenerate_asset("vidax_sana_video", lambda folder: save_tiny_sana_video(folder, seed=0))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
