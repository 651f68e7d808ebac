"""Regenerate the tiny random-weight SkyReels-V2 checkpoints that ship in vidax-skyreels: ``builtin:tiny-random``
(a diffusion-forcing pipeline, fps embedding), the text-to-video id's ``tiny-random-t2v`` and the image-to-video
id's ``tiny-random-i2v``, each written by diffusers' own ``save_pretrained``. Needs the test extra:
    python plugins/vidax_skyreels/scripts/make_tiny_asset.py
"""

from vidax_core.testing.assets import regenerate_asset
from vidax_skyreels.tiny import BUILTIN, save_tiny_skyreels

if __name__ == "__main__":
    for name, kind in BUILTIN.items():
        regenerate_asset("vidax_skyreels", lambda dest, kind=kind: save_tiny_skyreels(dest, kind, seed=0), name)
