"""Write config-only folders of the published Cosmos-Predict2.5 2B and 14B checkpoints (diffusers layout, no
weights), for ``vidax run --dry-run`` memory estimates (docs/models/cosmos.md). The DiT numbers are those of
diffusers' conversion script, the text encoder Cosmos-Reason1-7B's (Qwen2.5-VL-7B), the VAE diffusers' Wan2.1
defaults, the scheduler the conversion's UniPC. Cosmos3 Nano and Edge: the transformer configs of
``tests/test_cosmos3_full_size.py``, the Wan2.2 48-channel VAE, UniPC at flow shift 10 without Karras sigmas, and the
tiny test tokenizer standing in for the real one (a dry run reads no token).
Also prints the size of the text tower vidax builds from the text
encoder config (abstract: nothing is allocated), which the dry run does not report. Needs the test extra:
    python plugins/vidax_cosmos/scripts/published_config_folders.py OUT_DIR
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def text_encoder_size(config_path):
    """Parameter count of vidax's DecoderLLM text tower for the config at ``config_path``."""
    import jax
    import numpy as np
    from flax import nnx

    from vidax_core.encoders import decoder_llm as dl

    with open(config_path) as f:
        cfg = dl.DecoderLLMConfig.from_config(json.load(f))
    state = nnx.state(nnx.eval_shape(lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0))))
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state))


def main(out):
    import torch
    from diffusers import AutoencoderKLWan, CosmosTransformer3DModel
    from transformers import Qwen2_5_VLConfig

    sys.path.insert(0, os.path.join(ROOT, "plugins", "vidax_cosmos", "tests"))
    from test_cosmos_full_size import DITS, QWEN_7B

    from vidax_cosmos.original_format import SCHEDULER_CONFIG

    for model_id, dit in DITS.items():
        root = os.path.join(out, model_id)
        write(root, "model_index.json", {"_class_name": "Cosmos2_5_PredictBasePipeline",
                                         "scheduler": ["diffusers", "UniPCMultistepScheduler"],
                                         "text_encoder": ["transformers", "Qwen2_5_VLForConditionalGeneration"],
                                         "tokenizer": ["transformers", "Qwen2TokenizerFast"],
                                         "transformer": ["diffusers", "CosmosTransformer3DModel"],
                                         "vae": ["diffusers", "AutoencoderKLWan"]})
        with torch.device("meta"):
            cfg = dict(CosmosTransformer3DModel(**dit).config)
            vae = dict(AutoencoderKLWan().config)
        write(os.path.join(root, "transformer"), "config.json", {"_class_name": "CosmosTransformer3DModel", **cfg})
        write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLWan", **vae})
        te = Qwen2_5_VLConfig(text_config=QWEN_7B, vocab_size=QWEN_7B["vocab_size"]).to_dict()
        write(os.path.join(root, "text_encoder"), "config.json", te)
        write(os.path.join(root, "scheduler"), "scheduler_config.json", SCHEDULER_CONFIG)
        print(f"wrote {root}")
        n = text_encoder_size(os.path.join(root, "text_encoder", "config.json"))
        print(f"  text encoder (vidax text tower): {n / 1e9:.2f}B parameters, {n * 2 / 2**30:.1f} GiB in bf16, "
              f"{n * 4 / 2**30:.1f} GiB in fp32")

    cosmos3(out)


def cosmos3(out):
    import torch
    from diffusers import AutoencoderKLWan, Cosmos3OmniTransformer

    from test_cosmos3_full_size import CONFIGS
    from vidax_cosmos.cosmos3_tiny import SCHEDULER, make_tiny_cosmos3_tokenizer

    vae = dict(base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
               temperal_downsample=[False, True, True], is_residual=True, in_channels=12, out_channels=12,
               patch_size=2, scale_factor_spatial=16, scale_factor_temporal=4,
               latents_mean=[0.0] * 48, latents_std=[1.0] * 48)  # 48 channels (values as the Wan2.2 full-size test)
    for model_id, dit in CONFIGS.items():
        root = os.path.join(out, model_id)
        write(root, "model_index.json", {"_class_name": "Cosmos3OmniPipeline", "default_use_system_prompt": True,
                                         "enable_safety_checker": False, "use_native_flow_schedule": False,
                                         "scheduler": ["diffusers", "UniPCMultistepScheduler"],
                                         "text_tokenizer": ["transformers", "Qwen2TokenizerFast"],
                                         "transformer": ["diffusers", "Cosmos3OmniTransformer"],
                                         "vae": ["diffusers", "AutoencoderKLWan"]})
        with torch.device("meta"):
            cfg = dict(Cosmos3OmniTransformer(**dit).config)
            vae_cfg = dict(AutoencoderKLWan(**vae).config)
        write(os.path.join(root, "transformer"), "config.json", {"_class_name": "Cosmos3OmniTransformer", **cfg})
        write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLWan", **vae_cfg})
        write(os.path.join(root, "scheduler"), "scheduler_config.json",
              {"_class_name": "UniPCMultistepScheduler", **SCHEDULER})
        make_tiny_cosmos3_tokenizer(os.path.join(root, "text_tokenizer"))
        print(f"wrote {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/cosmos_configs")
