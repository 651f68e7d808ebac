"""Published configurations of the parts several families share, as their diffusers / transformers config.json
files hold them: the Wan2.1 VAE and the UMT5-XXL prompt encoder (Wan-AI/Wan2.1-T2V-14B-Diffusers' ``vae/`` and
``text_encoder/``; SkyReels-V2 and Helios ship the same). The full-size tests and the weight-free config folders read
them."""

WAN21_VAE = dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                 temperal_downsample=[False, True, True])
UMT5_XXL = dict(vocab_size=256384, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
                relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu")
