"""CogVideoX LoRAs (diffusers layout) fused as diffusers' ``load_lora_weights`` + ``set_adapters`` + ``fuse_lora``
fuses them, on the tiny transformer; an ignored or mis-scaled adapter misses far."""

from __future__ import annotations

from vidax_core.testing.lora import diffusers_fused, max_diff, random_lora, save_adapter, vidax_fused
from vidax_core.testing.tiny.cogvideox import random_cogvideox_dit

TOL = 1e-5


def test_cogvideox_diffusers_layout_fuses_as_diffusers(tmp_path):
    from diffusers import CogVideoXDDIMScheduler, CogVideoXPipeline

    tr = random_cogvideox_dit("2b", seed=1)
    pipe = CogVideoXPipeline(scheduler=CogVideoXDDIMScheduler(), vae=None, text_encoder=None, tokenizer=None,
                             transformer=tr)
    base = {k: v.detach().numpy().copy() for k, v in tr.state_dict().items()}
    a = save_adapter(tmp_path / "a.safetensors", random_lora(base, include=r"transformer_blocks\.\d+\..*", seed=1))
    b = save_adapter(tmp_path / "b.safetensors", random_lora(base, include=r"transformer_blocks\.0\.attn1\..*", seed=2))
    ours = vidax_fused(base, [(a, 0.7), (b, 1.3)], None)
    ref = diffusers_fused(pipe, [(a, 0.7, {}), (b, 1.3, {})])["transformer"]
    err = max_diff(ref, ours)
    assert err < TOL, err
    assert max_diff(ref, base) > 100 * TOL
    assert max_diff(ref, vidax_fused(base, [(a, 0.7)], None)) > 100 * TOL
