"""LTX-Video LoRAs (diffusers and ``diffusion_model.``-prefixed layouts) fused as diffusers' ``load_lora_weights`` +
``set_adapters`` + ``fuse_lora`` fuses them, on the tiny transformer; an ignored or mis-scaled adapter misses far."""

from __future__ import annotations

import pytest

from vidax_core.testing.lora import diffusers_fused, max_diff, random_lora, save_adapter, vidax_fused
from vidax_core.testing.tiny.ltx import random_ltx_dit

from vidax_ltx.plugin import LTXPlugin

TOL = 1e-5


@pytest.mark.parametrize("prefix", ["transformer.", "diffusion_model."])
def test_ltx_layouts_fuse_as_diffusers(tmp_path, prefix):
    from diffusers import FlowMatchEulerDiscreteScheduler, LTXPipeline

    tr = random_ltx_dit(seed=1)
    pipe = LTXPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=None, text_encoder=None, tokenizer=None,
                       transformer=tr)
    base = {k: v.detach().numpy().copy() for k, v in tr.state_dict().items()}
    path = save_adapter(tmp_path / "a.safetensors", random_lora(
        base, prefix=prefix, include=r"(transformer_blocks\.\d+\..*|proj_in|time_embed\..*)"))
    key_map = lambda layout: LTXPlugin().lora_key_map(None, layout)  # noqa: E731
    ours = vidax_fused(base, [(path, 0.7)], key_map)
    ref = diffusers_fused(pipe, [(path, 0.7, {})])["transformer"]
    err = max_diff(ref, ours)
    assert err < TOL, err
    assert max_diff(ref, base) > 100 * TOL
    assert max_diff(ref, vidax_fused(base, [(path, 0.35)], key_map)) > 100 * TOL


def test_original_names_are_renamed():
    """``diffusion_model.patchify_proj`` / ``adaln_single`` adapters land on ``proj_in`` / ``time_embed``."""
    rename = LTXPlugin().lora_key_map(None, "original")
    assert rename("patchify_proj") == "proj_in"
    assert rename("adaln_single.linear") == "time_embed.linear"
    assert rename("transformer_blocks.0.attn1.to_q") == "transformer_blocks.0.attn1.to_q"
