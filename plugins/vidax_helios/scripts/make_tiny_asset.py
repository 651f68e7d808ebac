"""Regenerate the tiny random-weight Helios checkpoint that ships in vidax-helios (``builtin:tiny-random``): a
HeliosPipeline written by diffusers' own ``save_pretrained``. Needs the test extra:
    python plugins/vidax_helios/scripts/make_tiny_asset.py
"""

from vidax_core.testing.assets import regenerate_asset
from vidax_helios.tiny import save_tiny_helios

if __name__ == "__main__":
    regenerate_asset("vidax_helios", lambda dest: save_tiny_helios(dest, seed=0))
