"""The LTX-2.5 diffusion decoder under tp x sp and offload + sp on 8 fake CPU devices (one layout per code path:
tp alone and offload alone run the same code), the frames of each against one device, and the mesh parallel.tp=8
gives it (prints one JSON line). Run by tests/test_ltx2_diffusion_decoder.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jax
import numpy as np
from flax import nnx

from vidax_core.parallel.sharding import per_device_bytes
from vidax_core.testing.tiny.ltx2 import DIFFUSION_DECODER
from vidax_ltx import ltx2_diffusion_decode as dd
from vidax_ltx.ltx2_diffusion_decoder import LTX2DiffusionDecoderConfig

LAYOUTS = {"single": (1, 1, False), "tp2sp2": (2, 2, False), "offload_sp2": (1, 2, True)}


def _run(tp, sp, offload):
    return SimpleNamespace(parallel=SimpleNamespace(tp=tp, sp=sp), offload=SimpleNamespace(enabled=offload))


def main(folder: str):
    """``folder``: the tiny decoder's ``save_pretrained`` folder (the test writes it; no torch here)."""
    from vidax_core.io.safetensors import SafetensorsFile

    cfg = LTX2DiffusionDecoderConfig.from_config(DIFFUSION_DECODER)
    tensors = SafetensorsFile(f"{folder}/diffusion_pytorch_model.safetensors")
    rng = np.random.default_rng(1)
    z = rng.standard_normal((1, 8, 2, 2, 3)).astype(np.float32)
    noise = rng.standard_normal((1, 3, 9, 64, 96)).astype(np.float32)
    out, ref = {"devices": jax.device_count()}, None
    for name, (tp, sp, offload) in LAYOUTS.items():
        placement = dd.placement_for(cfg, _run(tp, sp, offload))
        model = dd.load(cfg, tensors, placement)
        state = nnx.state(model)
        host = all(isinstance(v, np.ndarray) for v in jax.tree.leaves(state))
        kernel = model.det_stages[0].attn.to_q.kernel.get_value()
        frames = dd.decode(model, z, lambda k, s: noise, placement=placement)
        context = dd.context_volume(model, z, placement)
        ref = frames if ref is None else ref
        mesh = placement.mesh
        out[name] = {"max_abs": float(np.abs(frames - ref).max()), "placement": placement.describe(),
                     "mesh": dict(mesh.shape) if mesh is not None else None, "host_weights": host,
                     "q_kernel_spec": None if host else str(kernel.sharding.spec) if mesh is not None else None,
                     "weight_bytes_per_device": None if host else per_device_bytes(state),
                     "context_spec": str(context.sharding.spec) if mesh is not None else None}
    out["tp8_mesh"] = dict(dd.placement_for(cfg, _run(8, 1, False)).mesh.shape)
    print(json.dumps(out))


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
