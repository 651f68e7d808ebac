"""A lightx2v-style adapter with every key kind those files carry (blocks' attention, image projections, FFN, norm
and modulation deltas, head, embeddings, image embedder, patch embedding) maps onto the full-size Wan2.1 I2V 14B
checkpoint's tensor names and shapes, checked as a run checks it (the checkpoint is the diffusers model on the
meta device: no memory)."""

from __future__ import annotations

import numpy as np
import torch

from vidax_core.testing.lora import save_adapter
from vidax_core.testing.reference import meta_tensors

from vidax_wan.original_format import dit_key
from vidax_wan.plugin import WanPlugin

plugin = WanPlugin()

I2V_14B = dict(patch_size=(1, 2, 2), attention_head_dim=128, text_dim=4096, freq_dim=256, cross_attn_norm=True,
               qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024, num_attention_heads=40,
               ffn_dim=13824, num_layers=40, in_channels=36, out_channels=16, image_dim=1280, added_kv_proj_dim=5120)
LINEARS = ["self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q", "cross_attn.k",
           "cross_attn.v", "cross_attn.o", "cross_attn.k_img", "cross_attn.v_img", "ffn.0", "ffn.2"]
NORMS = ["self_attn.norm_q", "self_attn.norm_k", "cross_attn.norm_q", "cross_attn.norm_k", "cross_attn.norm_k_img",
         "norm3"]


def test_lightx2v_i2v_keys_map_onto_the_full_size_checkpoint(tmp_path):
    from diffusers import WanTransformer3DModel

    from vidax_core.lora.plan import read_adapter

    with torch.device("meta"):
        ckpt = meta_tensors(WanTransformer3DModel(**I2V_14B))
    shape = lambda original: ckpt.shape(dit_key(original))  # noqa: E731 - the original name's checkpoint tensor
    t = {}

    def lora(name):
        out, inp = shape(f"{name}.weight")
        t[f"diffusion_model.{name}.lora_down.weight"] = np.full((1, inp), 0.01, np.float32)
        t[f"diffusion_model.{name}.lora_up.weight"] = np.full((out, 1), 0.01, np.float32)
        t[f"diffusion_model.{name}.alpha"] = np.float32(1.0)
        t[f"diffusion_model.{name}.diff_b"] = np.zeros(out, np.float32)

    def diff(name, bias=False):
        t[f"diffusion_model.{name}.diff"] = np.zeros(shape(f"{name}.weight"), np.float32)
        if bias:
            t[f"diffusion_model.{name}.diff_b"] = np.zeros(shape(f"{name}.bias"), np.float32)

    blocks = (0, 7, I2V_14B["num_layers"] - 1)  # the first, one inside, the last: names repeat per block
    for b in blocks:
        for m in LINEARS:
            lora(f"blocks.{b}.{m}")
        for m in NORMS:
            diff(f"blocks.{b}.{m}", bias=m == "norm3")
        t[f"diffusion_model.blocks.{b}.diff_m"] = np.zeros(shape(f"blocks.{b}.modulation"), np.float32)
    for m in ("head.head", "text_embedding.0", "text_embedding.2", "time_embedding.0", "time_embedding.2",
              "time_projection.1", "img_emb.proj.1", "img_emb.proj.3"):
        lora(m)
    for m in ("img_emb.proj.0", "img_emb.proj.4", "patch_embedding"):
        diff(m, bias=True)
    path = save_adapter(tmp_path / "lightx2v_i2v.safetensors", t)
    adapter, targets = read_adapter(path, None, "lora[0]", lambda layout: plugin.lora_key_map(None, layout), ckpt,
                                    "wan2.1-i2v-14b-480p")
    assert len(targets) == len(adapter.records) == len(blocks) * (len(LINEARS) + len(NORMS) + 1) + 11
    touched = {t.weight_key for t in targets} | {t.bias_key for t in targets if "diff_b" in t.record.parts}
    assert {"blocks.39.attn2.add_v_proj.weight", "blocks.0.attn2.norm_added_k.weight", "blocks.7.norm2.bias",
            "blocks.7.scale_shift_table", "proj_out.bias", "condition_embedder.image_embedder.norm2.weight",
            "patch_embedding.weight", "condition_embedder.time_proj.weight"} <= touched
