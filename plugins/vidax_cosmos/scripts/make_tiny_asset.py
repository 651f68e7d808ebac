"""Regenerate the tiny random-weight Cosmos-Predict2.5 checkpoint that ships in vidax-cosmos (``builtin:tiny-random``).

Written by diffusers' own ``save_pretrained`` (a Cosmos2_5_PredictBasePipeline: tiny Qwen2.5-VL text encoder with
a tiny tokenizer and chat template, Cosmos DiT, Wan2.1 VAE, UniPC with karras flow sigmas), so it has exactly the
files and key names of a real diffusers-layout Cosmos-Predict2.5 checkpoint. Needs the test extra:
    python plugins/vidax_cosmos/scripts/make_tiny_asset.py
"""

import os
import shutil

from vidax_core.testing.assets import regenerate_asset
from vidax_cosmos.tiny import save_tiny_cosmos

if __name__ == "__main__":
    import torch

    def write(dest: str) -> None:
        torch.manual_seed(0)
        save_tiny_cosmos(dest, seed=0)
        shutil.rmtree(os.path.join(dest, "tokenizer", "_base"), ignore_errors=True)

    regenerate_asset("vidax_cosmos", write)
