"""Write a RANDOM-WEIGHT Wan2.1-T2V-1.3B-shaped checkpoint in diffusers layout, for speed and memory benchmarks on a
machine that cannot download the real one.

  python benchmarks/make_random_checkpoint.py OUT_DIR [--layers 30] [--dtype float32]

Shapes that decide speed and memory are the real ones: the DiT (30 blocks, width 1536, 12 heads, FFN 8960, text
width 4096) and the Wan2.1 VAE (base 96, z 16). The text encoder is NOT the 5.7B UMT5-XXL: it is a 1-layer UMT5
with the real output width (4096) and the tiny tokenizer of vidax-wan's built-in checkpoint, so prompt encoding
time is not representative (the bench reports it separately as encode_s; it is not part of per-step or decode).
``--small-vae`` narrows the VAE too (CPU offload cases, where only the per-step time matters).
Needs torch, diffusers and transformers (the test extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

WAN21_13B_DIT = dict(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16, out_channels=16,
    text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--layers", type=int, default=30, help="DiT blocks (default 30, the real 1.3B)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="dtype the DiT is saved in")
    p.add_argument("--small-vae", action="store_true",
                   help="a narrow VAE (base 8 instead of 96; same z 16): for DiT/offload cases where decode is noise")
    a = p.parse_args()

    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel
    from vidax_core.plugins import get_plugins

    if os.path.exists(os.path.join(a.out_dir, "model_index.json")):
        print(f"{a.out_dir} exists; keeping it")
        return
    t0 = time.perf_counter()
    plugins = get_plugins()
    tiny = plugins.call("builtin_checkpoint", plugins.registry.get("wan2.1-t2v-1.3b"), name="tiny-random")
    tok_dir = os.path.join(a.out_dir + ".tok")
    shutil.copytree(os.path.join(tiny, "tokenizer"), tok_dir, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    with open(os.path.join(tiny, "text_encoder", "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    torch.manual_seed(0)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=vocab, d_model=4096, d_kv=64, d_ff=256, num_layers=1,
                                               num_heads=8, relative_attention_num_buckets=32,
                                               feed_forward_proj="gated-gelu")).eval()
    transformer = WanTransformer3DModel(**{**WAN21_13B_DIT, "num_layers": a.layers}).eval()
    if a.dtype != "float32":
        transformer.to(getattr(torch, a.dtype))
    vae = AutoencoderKLWan(base_dim=8 if a.small_vae else 96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                           attn_scales=[], temperal_downsample=[False, True, True]).eval()
    sched = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                    num_train_timesteps=1000, flow_shift=3.0)
    pipe = WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer,
                       vae=vae, scheduler=sched)
    pipe.save_pretrained(a.out_dir, safe_serialization=True)
    shutil.rmtree(tok_dir, ignore_errors=True)
    print(f"wrote {a.out_dir} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
