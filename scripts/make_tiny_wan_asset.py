"""Regenerate the tiny random-weight Wan2.1 checkpoint that ships in vidax-wan (used by `make demo`).

It is written by diffusers' own `save_pretrained`, so it has exactly the files and key names of a real
diffusers-layout Wan checkpoint. Needs the test extra (torch, diffusers, transformers):
    python scripts/make_tiny_wan_asset.py
"""

import os
import shutil

from vidax_core.testing.tiny.wan import save_tiny_wan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEST = os.path.join(ROOT, "plugins", "vidax_wan", "src", "vidax_wan", "assets", "tiny-random")

if __name__ == "__main__":
    shutil.rmtree(DEST, ignore_errors=True)
    save_tiny_wan(DEST, seed=0)
    print(f"wrote {DEST}")
