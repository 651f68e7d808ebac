"""Original Wan-AI key names from diffusers / transformers names: the inverse maps used by tests to write tiny
checkpoints in the original release layout (Wan's own tests, and Cosmos-Predict2.5's ``tokenizer.pth``, which is the
Wan2.1 VAE).

They are written independently from the forward tables in ``vidax_wan.original_format`` and
``vidax_core.vae.wan_original``: they spell the original names as ``wan/modules/{model,vae,vae2_2,t5}.py`` define
them.
"""

from __future__ import annotations

import re


def inverse(key: str, table: list[tuple[str, str]]) -> str:
    for pattern, repl in table:
        new, n = re.subn("^" + pattern + "$", repl, key)
        if n:
            return new
    raise AssertionError(f"no inverse rule for {key}")


DIT_INV = [
    (r"condition_embedder\.time_embedder\.linear_1\.(.*)", r"time_embedding.0.\1"),
    (r"condition_embedder\.time_embedder\.linear_2\.(.*)", r"time_embedding.2.\1"),
    (r"condition_embedder\.text_embedder\.linear_1\.(.*)", r"text_embedding.0.\1"),
    (r"condition_embedder\.text_embedder\.linear_2\.(.*)", r"text_embedding.2.\1"),
    (r"condition_embedder\.time_proj\.(.*)", r"time_projection.1.\1"),
    (r"condition_embedder\.image_embedder\.norm1\.(.*)", r"img_emb.proj.0.\1"),
    (r"condition_embedder\.image_embedder\.ff\.net\.0\.proj\.(.*)", r"img_emb.proj.1.\1"),
    (r"condition_embedder\.image_embedder\.ff\.net\.2\.(.*)", r"img_emb.proj.3.\1"),
    (r"condition_embedder\.image_embedder\.norm2\.(.*)", r"img_emb.proj.4.\1"),
    (r"condition_embedder\.image_embedder\.pos_embed", "img_emb.emb_pos"),
    (r"scale_shift_table", "head.modulation"),
    (r"proj_out\.(.*)", r"head.head.\1"),
    (r"patch_embedding\.(.*)", r"patch_embedding.\1"),
    (r"blocks\.(\d+)\.scale_shift_table", r"blocks.\1.modulation"),
    (r"blocks\.(\d+)\.norm2\.(.*)", r"blocks.\1.norm3.\2"),
    (r"blocks\.(\d+)\.ffn\.net\.0\.proj\.(.*)", r"blocks.\1.ffn.0.\2"),
    (r"blocks\.(\d+)\.ffn\.net\.2\.(.*)", r"blocks.\1.ffn.2.\2"),
    (r"blocks\.(\d+)\.attn2\.add_k_proj\.(.*)", r"blocks.\1.cross_attn.k_img.\2"),
    (r"blocks\.(\d+)\.attn2\.add_v_proj\.(.*)", r"blocks.\1.cross_attn.v_img.\2"),
    (r"blocks\.(\d+)\.attn2\.norm_added_k\.(.*)", r"blocks.\1.cross_attn.norm_k_img.\2"),
    (r"blocks\.(\d+)\.attn1\.to_out\.0\.(.*)", r"blocks.\1.self_attn.o.\2"),
    (r"blocks\.(\d+)\.attn2\.to_out\.0\.(.*)", r"blocks.\1.cross_attn.o.\2"),
    (r"blocks\.(\d+)\.attn1\.to_([qkv])\.(.*)", r"blocks.\1.self_attn.\2.\3"),
    (r"blocks\.(\d+)\.attn2\.to_([qkv])\.(.*)", r"blocks.\1.cross_attn.\2.\3"),
    (r"blocks\.(\d+)\.attn1\.(norm_[qk])\.(.*)", r"blocks.\1.self_attn.\2.\3"),
    (r"blocks\.(\d+)\.attn2\.(norm_[qk])\.(.*)", r"blocks.\1.cross_attn.\2.\3"),
]

_RES_INV = {"norm1.gamma": "residual.0.gamma", "conv1.weight": "residual.2.weight", "conv1.bias": "residual.2.bias",
            "norm2.gamma": "residual.3.gamma", "conv2.weight": "residual.6.weight", "conv2.bias": "residual.6.bias",
            "conv_shortcut.weight": "shortcut.weight", "conv_shortcut.bias": "shortcut.bias"}


def vae_inverse(key: str, num_res_blocks: int, wan22: bool) -> str:
    r = num_res_blocks
    for pattern, fn in (
        (r"quant_conv\.(.*)", lambda m: f"conv1.{m[1]}"),
        (r"post_quant_conv\.(.*)", lambda m: f"conv2.{m[1]}"),
        (r"(\w+)\.conv_in\.(.*)", lambda m: f"{m[1]}.conv1.{m[2]}"),
        (r"(\w+)\.norm_out\.gamma", lambda m: f"{m[1]}.head.0.gamma"),
        (r"(\w+)\.conv_out\.(.*)", lambda m: f"{m[1]}.head.2.{m[2]}"),
        (r"(\w+)\.mid_block\.resnets\.(\d)\.(.*)", lambda m: f"{m[1]}.middle.{2 * int(m[2])}.{_RES_INV[m[3]]}"),
        (r"(\w+)\.mid_block\.attentions\.0\.(.*)", lambda m: f"{m[1]}.middle.1.{m[2]}"),
        # Wan 2.2: nested Down_ResidualBlock / Up_ResidualBlock (resblocks, then the resample)
        (r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)\.(.*)",
         lambda m: f"encoder.downsamples.{m[1]}.downsamples.{m[2]}.{_RES_INV[m[3]]}"),
        (r"encoder\.down_blocks\.(\d+)\.downsampler\.(.*)",
         lambda m: f"encoder.downsamples.{m[1]}.downsamples.{r}.{m[2]}"),
        (r"decoder\.up_blocks\.(\d+)\.upsampler\.(.*)",
         lambda m: f"decoder.upsamples.{m[1]}.upsamples.{r + 1}.{m[2]}"),
        # Wan 2.1: one flat list per side
        (r"encoder\.down_blocks\.(\d+)\.(resample\.1|time_conv)\.(.*)",
         lambda m: f"encoder.downsamples.{m[1]}.{m[2]}.{m[3]}"),
        (r"encoder\.down_blocks\.(\d+)\.(.*)", lambda m: f"encoder.downsamples.{m[1]}.{_RES_INV[m[2]]}"),
        (r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.(.*)",
         lambda m: f"decoder.upsamples.{int(m[1]) * (r + 2) + r + 1}.{m[2]}"),
    ):
        m = re.fullmatch(pattern, key)
        if m:
            return fn(m)
    m = re.fullmatch(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.*)", key)
    assert m, key
    if wan22:
        return f"decoder.upsamples.{m[1]}.upsamples.{m[2]}.{_RES_INV[m[3]]}"
    return f"decoder.upsamples.{int(m[1]) * (r + 2) + int(m[2])}.{_RES_INV[m[3]]}"


T5_INV = [
    (r"(?:shared|encoder\.embed_tokens)\.weight", "token_embedding.weight"),
    (r"encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.([qkvo])\.weight", r"blocks.\1.attn.\2.weight"),
    (r"encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.relative_attention_bias\.weight",
     r"blocks.\1.pos_embedding.embedding.weight"),
    (r"encoder\.block\.(\d+)\.layer\.0\.layer_norm\.weight", r"blocks.\1.norm1.weight"),
    (r"encoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"blocks.\1.norm2.weight"),
    (r"encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wi_0\.weight", r"blocks.\1.ffn.gate.0.weight"),
    (r"encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wi_1\.weight", r"blocks.\1.ffn.fc1.weight"),
    (r"encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wo\.weight", r"blocks.\1.ffn.fc2.weight"),
    (r"encoder\.final_layer_norm\.weight", "norm.weight"),
]
