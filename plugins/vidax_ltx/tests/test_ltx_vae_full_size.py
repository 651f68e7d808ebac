"""The published LTX-Video 0.9.8 VAE built abstractly (no weights): every diffusers key and shape of
``AutoencoderKLLTXVideo`` (built on the meta device) lands on a vidax parameter of that shape, in both the
diffusers and the original single-file naming."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_core.testing.reference import check_full_size, meta_tensors  # noqa: E402
from vidax_ltx.vae import PUBLISHED_VAE_CONFIG, LTXVAE, LTXVAEConfig  # noqa: E402
from vidax_ltx.vae_convert import DECODER_IGNORE, STATS_KEYS, original_vae_tensors, vae_rules  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_vae")


def _reference():
    return diffusers.AutoencoderKLLTXVideo(**PUBLISHED_VAE_CONFIG)


@pytest.mark.parametrize("with_encoder", [True, False])
def test_published_vae_layout(with_encoder):
    cfg = LTXVAEConfig.from_config(PUBLISHED_VAE_CONFIG)
    ignore = list(STATS_KEYS) + ([] if with_encoder else DECODER_IGNORE)
    size = check_full_size(_reference, vae_rules(with_encoder), lambda: LTXVAE(cfg, with_encoder=with_encoder),
                           component="vae", ignore=ignore, label=f"published VAE (encoder: {with_encoder})")
    kept = {k for k in size.tensors if k not in STATS_KEYS and (with_encoder or k.startswith("decoder."))}
    assert set(size.tensors) - set(size.dropped) == kept


def test_published_vae_original_names():
    from test_ltx_vae import original_state_dict  # the independent inverse, checked against diffusers there

    tensors = meta_tensors(_reference)
    renamed = original_vae_tensors(original_state_dict(tensors, down_blocks=9))
    assert sorted(renamed) == sorted(tensors)


def test_published_vae_traces_the_reference_resolution():
    """The full-size decoder and encoder trace (shapes only, no weights) at the pipelines' 704x512, 161 frames:
    21 x 16 x 22 latents <-> 161 x 512 x 704 pixels, one log-variance channel beside the 128 means."""
    import jax
    from flax import nnx

    cfg = LTXVAEConfig.from_config(PUBLISHED_VAE_CONFIG)
    graphdef, state, _ = abstract_model(lambda: LTXVAE(cfg, with_encoder=True))
    z = jax.ShapeDtypeStruct((1, 21, 16, 22, 128), np.float32)
    t = jax.ShapeDtypeStruct((1,), np.float32)
    video = jax.eval_shape(lambda s, z, t: nnx.merge(graphdef, s).decoder(z, t), state, z, t)
    assert video.shape == (1, 161, 512, 704, 3)
    x = jax.ShapeDtypeStruct((1, 161, 512, 704, 3), np.float32)
    assert jax.eval_shape(lambda s, x: nnx.merge(graphdef, s).encoder(x), state, x).shape == (1, 21, 16, 22, 129)
