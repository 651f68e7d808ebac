"""HunyuanVideo LoRAs in the diffusers layout and in the original names (fused ``img_attn_qkv`` / ``txt_attn_qkv``
split in three, a single block's ``linear1`` in four, the final AdaLN's (shift, scale) swapped), fused into the
tiny transformer's diffusers-named tensors as a vidax load fuses them.

The diffusers layout and the original double-block names are compared with diffusers' ``load_lora_weights`` +
``fuse_lora``. Two original cases diffusers cannot serve are checked against the split of the fused delta itself
(the same rule that splits the checkpoint's own weight): ``linear1`` (diffusers splits it with a hard-coded width
of 3072) and ``final_layer.adaLN_modulation.1`` (diffusers swaps the halves of lora_A's rank rows as well)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.lora import diffusers_fused, max_diff, random_lora, save_adapter, vidax_fused
from vidax_core.testing.tiny.hunyuan import TINY_DIT

from vidax_hunyuan.plugin import HunyuanPlugin

TOL = 1e-5
D = TINY_DIT["num_attention_heads"] * TINY_DIT["attention_head_dim"]
MLP = int(D * TINY_DIT["mlp_ratio"])
R = 4


def key_map(layout):
    return HunyuanPlugin().lora_key_map(None, layout)


def pipeline():
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, HunyuanVideoPipeline, HunyuanVideoTransformer3DModel

    from vidax_core.testing.reference import randomize_

    torch.manual_seed(0)
    tr = HunyuanVideoTransformer3DModel(**TINY_DIT).eval().float()
    randomize_(tr, 3, 0.15)
    pipe = HunyuanVideoPipeline(text_encoder=None, tokenizer=None, transformer=tr, vae=None,
                                scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0), text_encoder_2=None,
                                tokenizer_2=None)
    return pipe, {k: v.detach().numpy().copy() for k, v in tr.state_dict().items()}


def lora_pair(rng, out, inp):
    return rng.normal(0, 0.3, (R, inp)).astype(np.float32), rng.normal(0, 0.3, (out, R)).astype(np.float32)


def original_adapter(path, modules, seed=0):
    rng = np.random.default_rng(seed)
    t = {}
    for m, (o, i) in modules.items():
        t[f"diffusion_model.{m}.lora_A.weight"], t[f"diffusion_model.{m}.lora_B.weight"] = lora_pair(rng, o, i)
    return save_adapter(path, t), t


DOUBLE = {f"double_blocks.{b}.{m}": s for b in range(TINY_DIT["num_layers"]) for m, s in {
    "img_attn_qkv": (3 * D, D), "txt_attn_qkv": (3 * D, D), "img_attn_proj": (D, D), "txt_attn_proj": (D, D),
    "img_mlp.fc1": (MLP, D), "img_mlp.fc2": (D, MLP), "img_mod.linear": (6 * D, D)}.items()}


def test_diffusers_layout_fuses_as_diffusers(tmp_path):
    pipe, base = pipeline()
    path = save_adapter(tmp_path / "a.safetensors", random_lora(
        base, include=r"(transformer_blocks|single_transformer_blocks)\.\d+\..*|proj_out"))
    ours = vidax_fused(base, [(path, 0.8)], key_map)
    ref = diffusers_fused(pipe, [(path, 0.8, {})])["transformer"]
    assert max_diff(ref, ours) < TOL
    assert max_diff(ref, base) > 100 * TOL


def test_original_double_blocks_fuse_as_diffusers(tmp_path):
    pipe, base = pipeline()
    path, _ = original_adapter(tmp_path / "o.safetensors", {**DOUBLE, "final_layer.linear": (4 * 4, D)})
    ours = vidax_fused(base, [(path, 0.9)], key_map)
    ref = diffusers_fused(pipe, [(path, 0.9, {})])["transformer"]
    assert max_diff(ref, ours) < TOL
    assert max_diff(ref, base) > 100 * TOL
    touched = ours["transformer_blocks.0.attn.to_k.weight"] - base["transformer_blocks.0.attn.to_k.weight"]
    assert np.abs(touched).max() > 0.01  # the middle third of the fused qkv delta


@pytest.mark.parametrize("module, pieces", [
    ("single_blocks.1.linear1", [("single_transformer_blocks.1.attn.to_q", 0, D),
                                 ("single_transformer_blocks.1.attn.to_k", D, 2 * D),
                                 ("single_transformer_blocks.1.attn.to_v", 2 * D, 3 * D),
                                 ("single_transformer_blocks.1.proj_mlp", 3 * D, 3 * D + MLP)]),
    ("final_layer.adaLN_modulation.1", "swap"),
])
def test_original_split_and_swap(tmp_path, module, pieces):
    _, base = pipeline()
    out = 3 * D + MLP if pieces != "swap" else 2 * D
    path, t = original_adapter(tmp_path / "s.safetensors", {module: (out, D)}, seed=5)
    down, up = t[f"diffusion_model.{module}.lora_A.weight"], t[f"diffusion_model.{module}.lora_B.weight"]
    delta = 0.6 * up @ down
    ours = vidax_fused(base, [(path, 0.6)], key_map)
    if pieces == "swap":  # original (shift, scale) rows -> diffusers norm_out.linear (scale, shift)
        want = {"norm_out.linear.weight": np.concatenate([delta[D:], delta[:D]])}
    else:
        want = {f"{m}.weight": delta[lo:hi] for m, lo, hi in pieces}
    for k, d in want.items():
        np.testing.assert_allclose(ours[k], base[k] + d, rtol=0, atol=1e-6)
        assert np.abs(d).max() > 0.05
    untouched = {k: v for k, v in ours.items() if k not in want}
    assert max_diff(untouched, base) == 0.0
