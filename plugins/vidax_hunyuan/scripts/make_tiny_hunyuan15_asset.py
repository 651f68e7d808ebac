"""Regenerate the tiny random-weight HunyuanVideo-1.5 checkpoint that ships in vidax-hunyuan (``builtin:tiny-random``
of the ``hunyuanvideo-1.5-*`` text-to-video ids, folder ``assets/hunyuan15-tiny-random``).

diffusers' own ``save_pretrained`` of the tiny ``HunyuanVideo15Pipeline`` of :mod:`vidax_hunyuan.hunyuan15_tiny`
(tiny Qwen2.5-VL text tower and chat template, tiny byT5, 2-block DiT, tiny VAE, flow Euler at shift 5, CFG 6), so it
has exactly the files and key names of a real diffusers-layout checkpoint. The DiT's byT5 projection keeps the
pipeline's fixed 2048 width: its 2048 x 2048 middle layer is zero outside a random 64 x 64 block (zeros compress in
git and in the wheel), and the transformer is stored in bfloat16, as the published weights are. Needs the test extra:
    python plugins/vidax_hunyuan/scripts/make_tiny_hunyuan15_asset.py
"""

import glob
import os

from vidax_core.testing.assets import regenerate_asset
from vidax_hunyuan.hunyuan15_tiny import save_tiny_hunyuan15


def _to_bfloat16(folder: str) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    for path in glob.glob(os.path.join(folder, "*.safetensors")):
        tensors = load_file(path)
        middle = tensors["context_embedder_2.linear_2.weight"]
        sparse = torch.zeros_like(middle)
        sparse[:64, :64] = middle[:64, :64]
        tensors["context_embedder_2.linear_2.weight"] = sparse
        tensors = {k: v.to(torch.bfloat16) for k, v in tensors.items()}
        save_file(tensors, path, metadata={"format": "pt"})


if __name__ == "__main__":

    def write(dest: str) -> None:
        save_tiny_hunyuan15(dest, seed=0)
        _to_bfloat16(os.path.join(dest, "transformer"))

    dest = regenerate_asset("vidax_hunyuan", write, name="hunyuan15-tiny-random")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
