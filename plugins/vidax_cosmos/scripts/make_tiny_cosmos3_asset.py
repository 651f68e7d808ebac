"""Regenerate the tiny random-weight Cosmos3 checkpoint that ships in vidax-cosmos (``builtin:tiny-random`` of the
``cosmos3-*`` ids, folder ``assets/cosmos3-tiny-random``).

Written by diffusers' own ``save_pretrained`` (a Nano-style ``Cosmos3OmniPipeline``: tiny mixture-of-transformers
DiT, tiny Wan2.2 VAE, the tiny Qwen-style tokenizer with ``<|vision_start|>``, UniPC at flow shift 10), so it has
exactly the files and key names of a real diffusers-layout Cosmos3 checkpoint. Needs the test extra:
    python plugins/vidax_cosmos/scripts/make_tiny_cosmos3_asset.py
"""

import os
import shutil

from vidax_core.testing.assets import regenerate_asset
from vidax_cosmos.cosmos3_tiny import save_tiny_cosmos3

if __name__ == "__main__":

    def write(dest: str) -> None:
        save_tiny_cosmos3(dest, "nano", seed=0)
        shutil.rmtree(os.path.join(dest, "text_tokenizer", "_base"), ignore_errors=True)

    regenerate_asset("vidax_cosmos", write, name="cosmos3-tiny-random")
