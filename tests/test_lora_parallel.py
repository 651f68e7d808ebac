"""An adapter fused at load under tensor parallel, sequence parallel and block offload gives the one-device
latents (the fused weights are ordinary weights to sharding and offload), and so does an unfused one under tensor
parallel (its factors sharded as their kernel's axes); without it the run lands far away.
ONE subprocess on fake CPU devices runs every configuration (the Wan built-in tiny checkpoint)."""

from __future__ import annotations

import os

import numpy as np


def adapter(path):
    from vidax_core.testing.lora import save_adapter

    rng = np.random.default_rng(0)
    t = {}
    for b in range(2):
        for m, (o, i) in {"self_attn.q": (24, 24), "self_attn.o": (24, 24), "cross_attn.v": (24, 24),
                          "ffn.0": (32, 24), "ffn.2": (24, 32)}.items():
            k = f"diffusion_model.blocks.{b}.{m}"
            t[f"{k}.lora_down.weight"] = rng.normal(0, 0.5, (4, i)).astype(np.float32)
            t[f"{k}.lora_up.weight"] = rng.normal(0, 0.5, (o, 4)).astype(np.float32)
            t[f"{k}.alpha"] = np.float32(8.0)
            t[f"{k}.diff_b"] = rng.normal(0, 0.2, o).astype(np.float32)
    return save_adapter(path, t)


def test_adapter_under_tp_sp_offload_equals_one_device(tmp_path):
    import vidax_wan

    from vidax_core.testing.runs import run_many

    path = adapter(tmp_path / "a.safetensors")
    ckpt = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    base = ["model.id=wan2.1-t2v-1.3b", f"model.checkpoint={ckpt}", "prompt=a red fox", "negative_prompt=blurry",
            "sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
            "sampling.max_sequence_length=8", "parallel.dp=1"]
    lora = f"lora=[{{path: {path}, scale: 0.8}}]"
    runs = run_many(base, {"one": (lora,), "tp2": (lora, "parallel.tp=2"),
                           "sp2_offload": (lora, "parallel.sp=2", "offload.enabled=true", "offload.chunk_size=1"),
                           "tp2_unfused": (lora, "parallel.tp=2", "lora_mode=unfused"),
                           "no_adapter": ()})
    for name in ("tp2", "sp2_offload", "tp2_unfused"):
        r = runs[name]
        print(f"lora {name}: " + (r["error"] if "error" in r else f"rel vs one device {r['rel']:.2e}"))
        assert "error" not in r and r["rel"] < 1e-5, r
    assert runs["tp2"]["parallel"]["tp"] == 2 and runs["sp2_offload"]["parallel"]["sp"] == 2
    assert runs["sp2_offload"]["offload"]["enabled"]
    assert runs["no_adapter"]["rel"] > 1e-2, runs["no_adapter"]
    print(f"per-step s with / without the adapter: {runs['one']['per_step_s']:.4f} / "
          f"{runs['no_adapter']['per_step_s']:.4f}")
