"""The full-size CogVideoX VAE without weights: the published vae/config.json builds vidax's model shape-only, and
its parameters are exactly the keys and shapes of diffusers' AutoencoderKLCogVideoX built on the meta device.

Zero-stride stand-in arrays carry the shapes, so nothing of the real size is allocated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_core.testing.reference import check_full_size  # noqa: E402
from vidax_core.vae.causal_conv import FeatureCache  # noqa: E402
from vidax_cogvideox import vae as V  # noqa: E402
from vidax_cogvideox.vae_convert import DECODE_ONLY_IGNORE, DECODER_RULES, VAE_RULES  # noqa: E402

pytestmark = pytest.mark.xdist_group("cogvideox_vae")

#: vae/config.json of THUDM/CogVideoX-5b (CogVideoX-2b differs only in scaling_factor 1.15258426; the 1.5 repos add
#: invert_scale_latents: true).
COGVIDEOX_5B_VAE = {
    "_class_name": "AutoencoderKLCogVideoX",
    "_diffusers_version": "0.31.0.dev0",
    "act_fn": "silu",
    "block_out_channels": [128, 256, 256, 512],
    "down_block_types": ["CogVideoXDownBlock3D"] * 4,
    "force_upcast": True,
    "in_channels": 3,
    "latent_channels": 16,
    "latents_mean": None,
    "latents_std": None,
    "layers_per_block": 3,
    "norm_eps": 1e-06,
    "norm_num_groups": 32,
    "out_channels": 3,
    "sample_height": 480,
    "sample_width": 720,
    "scaling_factor": 0.7,
    "shift_factor": None,
    "temporal_compression_ratio": 4,
    "up_block_types": ["CogVideoXUpBlock3D"] * 4,
    "use_post_quant_conv": False,
    "use_quant_conv": False,
}
VARIANTS = {
    "cogvideox-2b": {**COGVIDEOX_5B_VAE, "scaling_factor": 1.15258426},
    "cogvideox-5b": COGVIDEOX_5B_VAE,
    "cogvideox1.5-5b": {**COGVIDEOX_5B_VAE, "invert_scale_latents": True},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_full_size_keys_and_shapes(variant):
    config = VARIANTS[variant]
    cfg = V.CogVideoXVAEConfig.from_config(config)
    assert cfg.invert_scale_latents == (variant == "cogvideox1.5-5b")
    kwargs = {k: v for k, v in config.items() if not k.startswith("_")}
    size = check_full_size(lambda: diffusers.AutoencoderKLCogVideoX(**kwargs), VAE_RULES,
                           lambda: V.CogVideoXVAE(cfg, with_encoder=True), component="vae")
    assert size.vidax_leaves == size.reference_tensors == 436
    check_full_size(size.tensors, DECODER_RULES, lambda: V.CogVideoXVAE(cfg, with_encoder=False), component="vae",
                    ignore=DECODE_ONLY_IGNORE, label="vae decoder")


def test_full_size_decode_and_encode_shapes():
    """Shape-only trace of one full-size frame batch each way: 3 latent frames of 60 x 90 -> 9 frames of 480 x 720,
    9 frames of 480 x 720 -> 3 latent frames of 2 x 16 channels."""
    cfg = V.CogVideoXVAEConfig.from_config(COGVIDEOX_5B_VAE)
    graphdef, state, _ = abstract_model(lambda: V.CogVideoXVAE(cfg))

    def dec(st, z):
        return nnx.merge(graphdef, st).decoder(z, FeatureCache(None))

    def enc(st, x):
        return nnx.merge(graphdef, st).encoder(x, FeatureCache(None))

    out = jax.eval_shape(dec, state, jax.ShapeDtypeStruct((1, 3, 60, 90, 16), jnp.float32))
    assert out.shape == (1, 9, 480, 720, 3)
    moments = jax.eval_shape(enc, state, jax.ShapeDtypeStruct((1, 9, 480, 720, 3), jnp.float32))
    assert moments.shape == (1, 3, 60, 90, 32)
    assert V.decode_plan(cfg, (60, 90), True).num_tiles == 9  # enable_tiling() at 720x480: 3 x 3 tiles
