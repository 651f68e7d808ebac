"""Published configurations of the parts several families share, as their diffusers / transformers config.json
files hold them: the Wan2.1 VAE and the UMT5-XXL prompt encoder (Wan-AI/Wan2.1-T2V-14B-Diffusers' ``vae/`` and
``text_encoder/``; SkyReels-V2 and Helios ship the same), and the CLIP ViT-H/14 image tower with its preprocessing
(Wan2.1-I2V's and SkyReels-V2-I2V's ``image_encoder/`` and ``image_processor/``).
The full-size tests and the weight-free config folders read
them."""

WAN21_VAE = dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                 temperal_downsample=[False, True, True])
UMT5_XXL = dict(vocab_size=256384, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
                relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu")
CLIP_VIT_H = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16,
                  image_size=224, patch_size=14, hidden_act="gelu", projection_dim=1024)
CLIP_PREPROCESSOR = {"crop_size": {"height": 224, "width": 224}, "do_center_crop": True, "do_normalize": True,
                     "do_resize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                     "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": {"shortest_edge": 224},
                     "image_processor_type": "CLIPImageProcessor"}
