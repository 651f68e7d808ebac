"""The published LTX-Video 0.9.8 VAE built abstractly (no weights): every diffusers key and shape of
``AutoencoderKLLTXVideo`` (built on the meta device) lands on a vidax parameter of that shape, in both the
diffusers and the original single-file naming."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import convert  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_ltx.vae import PUBLISHED_VAE_CONFIG, LTXVAE, LTXVAEConfig  # noqa: E402
from vidax_ltx.vae_convert import DECODER_IGNORE, STATS_KEYS, original_vae_tensors, vae_rules  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_vae")


def _meta_shapes() -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        ref = diffusers.AutoencoderKLLTXVideo(**PUBLISHED_VAE_CONFIG)
    return {k: tuple(v.shape) for k, v in ref.state_dict().items()}


def _stand_ins(shapes):
    return {k: np.broadcast_to(np.zeros((), np.float32), s) for k, s in shapes.items()}


@pytest.mark.parametrize("with_encoder", [True, False])
def test_published_vae_layout(with_encoder):
    shapes = _meta_shapes()
    cfg = LTXVAEConfig.from_config(PUBLISHED_VAE_CONFIG)
    _, _, flat = abstract_model(lambda: LTXVAE(cfg, with_encoder=with_encoder))
    ignore = list(STATS_KEYS) + ([] if with_encoder else DECODER_IGNORE)
    out = convert(_stand_ins(shapes), vae_rules(with_encoder), flat, component="vae", ignore=ignore, check_only=True)
    assert len(out) == len(flat)
    n = sum(int(np.prod(s)) for k, s in shapes.items() if k not in STATS_KEYS and (with_encoder or k.startswith("decoder.")))
    assert sum(int(np.prod(v.shape)) for v in flat.values()) == n
    if with_encoder:
        print(f"published VAE: {len(flat)} tensors, {n / 1e6:.1f}M parameters")


def test_published_vae_original_names():
    from test_ltx_vae import original_state_dict  # the independent inverse, checked against diffusers there

    shapes = _meta_shapes()
    renamed = original_vae_tensors(original_state_dict(_stand_ins(shapes), down_blocks=9))
    assert sorted(renamed) == sorted(shapes)


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
