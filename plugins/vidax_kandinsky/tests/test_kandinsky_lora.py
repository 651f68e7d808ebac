"""Kandinsky 5 LoRAs in diffusers' (peft) layout, ``KandinskyLoraLoaderMixin``'s: ``transformer.<module>.lora_A /
lora_B`` on the DiT's diffusers module names (attention projections, feed-forwards, modulations) land on the
checkpoint's tensors as they are, and fuse as diffusers' ``load_lora_weights`` + ``fuse_lora`` fuses them."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from vidax_core.testing.lora import diffusers_fused, max_diff, random_lora, save_adapter, vidax_fused  # noqa: E402
from vidax_kandinsky.tiny import TINY_DIT  # noqa: E402

TOL = 1e-5


def pipeline():
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, Kandinsky5T2VPipeline, Kandinsky5Transformer3DModel

    from vidax_core.testing.reference import randomize_, state_arrays

    torch.manual_seed(0)
    tr = Kandinsky5Transformer3DModel(**TINY_DIT).eval().float()
    randomize_(tr, 3, 0.15)
    pipe = Kandinsky5T2VPipeline(transformer=tr, vae=None, text_encoder=None, tokenizer=None, text_encoder_2=None,
                                 tokenizer_2=None, scheduler=FlowMatchEulerDiscreteScheduler(shift=5.0))
    return pipe, {k: v.copy() for k, v in state_arrays(tr).items()}  # fuse_lora changes the module in place


def test_diffusers_layout_fuses_as_diffusers(tmp_path):
    pipe, base = pipeline()
    path = save_adapter(tmp_path / "a.safetensors", random_lora(
        base, include=r"(text|visual)_transformer_blocks\.\d+\.(self_attention|cross_attention|feed_forward)\..*"
                      r"|visual_transformer_blocks\.\d+\.visual_modulation\.out_layer|out_layer\.out_layer"))
    ours = vidax_fused(base, [(path, 0.7)], None)
    ref = diffusers_fused(pipe, [(path, 0.7, {})])["transformer"]
    assert max_diff(ref, ours) < TOL
    assert max_diff(ref, base) > 100 * TOL
