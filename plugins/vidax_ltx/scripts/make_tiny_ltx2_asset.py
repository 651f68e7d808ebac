"""Regenerate the tiny random-weight LTX-2.x checkpoint that ships in vidax-ltx (``builtin:tiny-random`` of the
``ltx-2*`` ids, folder ``assets/ltx2-tiny-random``).

diffusers' own ``save_pretrained`` of the tiny LTX-2.5-style ``LTX2Pipeline`` of :mod:`vidax_core.testing.tiny.ltx2`
(tiny Gemma-4 unified and connectors, 2-block joint DiT with STG's perturbed attention, a narrower video VAE with the
timestep-conditioned decoder, audio VAE, vocoder, the dev scheduler), so it has exactly the files and key names of a
real diffusers-layout checkpoint; the DiT and the three decoders are stored in bfloat16, as the published weights
are. Needs the test extra:
    python plugins/vidax_ltx/scripts/make_tiny_ltx2_asset.py
"""

import glob
import os
import shutil
import tempfile

from vidax_core.testing.assets import regenerate_asset
from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

#: Narrower than the parity tests' video VAE: the asset ships in the wheel.
ASSET_VAE = dict(block_out_channels=(8, 16, 16, 32), decoder_block_out_channels=(8, 16, 32))
BFLOAT16 = ("transformer", "vae", "audio_vae", "vocoder")


def _to_bfloat16(folder: str) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    for path in glob.glob(os.path.join(folder, "*.safetensors")):
        tensors = {k: v.to(torch.bfloat16) for k, v in load_file(path).items()}
        save_file(tensors, path, metadata={"format": "pt"})


if __name__ == "__main__":

    def write(dest: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            _, ckpt = build_tiny_ltx2_pipeline(tmp, "ltx2.5", seed=0, vae=ASSET_VAE)
            shutil.copytree(ckpt, dest)
        for name in BFLOAT16:
            _to_bfloat16(os.path.join(dest, name))

    dest = regenerate_asset("vidax_ltx", write, name="ltx2-tiny-random")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    print(f"{total / 1e6:.2f} MB")
