"""Kandinsky 6 SR's K-VAE and latent upscaler bank against diffusers' ``Kandinsky6SRVAE`` and
``Kandinsky6SRLatentUpscalerBank`` (torch is a test-only oracle), fp32, highest matmul precision.

The K-VAE: a 21-frame clip, which the reference encodes in two causal segments (17 + 4 frames) and decodes in two
(5 + 1 latent frames) carrying their padding, against vidax's single pass; a one-frame clip; a second layout (4
levels, time compression from level 1). The bank: its x2 and x4 models. Bound 1e-5 relative L2 (the
implementations agree to ~3e-7); the mutation test shows the first frame's special handling matters: zeros as the
causal past, or the first latent frame nearest-upsampled with the rest, land far past it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.reference import randomize_, state_arrays  # noqa: E402
from vidax_kandinsky import k6sr_upscaler, k6sr_vae  # noqa: E402
from vidax_kandinsky.k6sr_tiny import TINY_SR_UPSCALER, TINY_SR_VAE  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_sr")

BOUND = 1e-5
DEEP = dict(encoder_block_out_channels=(4, 8, 8, 8), decoder_block_out_channels=(4, 8, 8, 16),
            temporal_compression_start_level=1, layers_per_block=2, latent_channels=6)


def build_vae(extra: dict):
    from diffusers import Kandinsky6SRVAE

    torch.manual_seed(0)
    ref = Kandinsky6SRVAE(**{**TINY_SR_VAE, **extra}).eval().float()
    randomize_(ref, 4, 0.1)
    cfg = k6sr_vae.Kandinsky6SRVAEConfig.from_config(dict(ref.config))
    return ref, cfg, k6sr_vae.load_kvae(cfg, state_arrays(ref))


def clip(cfg, frames: int) -> np.ndarray:
    r = cfg.spatial_ratio
    return np.random.default_rng(0).uniform(-1, 1, (1, 3, frames, 4 * r, 6 * r)).astype(np.float32)


def vidax_roundtrip(vae, x):
    mean = np.moveaxis(np.asarray(jax.jit(lambda v, a: v.encode_mean(a))(vae, jnp.moveaxis(x, 1, -1))), -1, 1)
    return mean, vidax_decode(vae, mean)


def vidax_decode(vae, z):
    return np.moveaxis(np.asarray(jax.jit(lambda v, a: v.decode(a))(vae, jnp.moveaxis(z, 1, -1))), -1, 1)


def reference_roundtrip(ref, x):
    with torch.no_grad():
        mean = ref.encode(torch.from_numpy(x)).latent_dist.mode()
        return mean.numpy(), ref.decode(mean).sample.numpy()


@pytest.mark.parametrize("layout", ["tiny", "deep"])
def test_kvae_matches_diffusers(layout):
    ref, cfg, vae = build_vae({} if layout == "tiny" else DEEP)
    for frames in ((21, 1) if layout == "tiny" else (21,)):
        x = clip(cfg, frames)
        (m_ref, d_ref), (m, d) = reference_roundtrip(ref, x), vidax_roundtrip(vae, x)
        assert m.shape == m_ref.shape and d.shape == d_ref.shape == x.shape
        errs = rel_l2(m, m_ref), rel_l2(vidax_decode(vae, m_ref), d_ref)
        print(f"kandinsky6 sr k-vae {layout}, {frames} frames: encode rel {errs[0]:.3e}, decode rel {errs[1]:.3e}")
        assert max(errs) <= BOUND


def test_kvae_first_frame_handling_is_caught(monkeypatch):
    ref, cfg, vae = build_vae({})
    x = clip(cfg, 21)
    m_ref, d_ref = reference_roundtrip(ref, x)
    monkeypatch.setattr(k6sr_vae, "causal_pad", lambda a, n: a if n == 0 else jnp.concatenate(
        [jnp.zeros((a.shape[0], n) + a.shape[2:], a.dtype), a], axis=1))
    err = rel_l2(vidax_roundtrip(vae, x)[0], m_ref)
    print(f"k-vae with zeros as the causal past: encode rel {err:.3e}")
    assert err > 100 * BOUND
    monkeypatch.undo()

    def one_pass(self, x, zq):
        return self.norm_layer(x) * self.conv_y(k6sr_vae.nearest(zq, x.shape[1:4])) + \
            self.conv_b(k6sr_vae.nearest(zq, x.shape[1:4]))

    monkeypatch.setattr(k6sr_vae.SpatialNorm, "__call__", one_pass)
    err = rel_l2(vidax_decode(vae, m_ref), d_ref)
    print(f"k-vae with the first latent frame upsampled with the rest: decode rel {err:.3e}")
    assert err > 100 * BOUND


def test_latent_upscalers_match_diffusers():
    from diffusers import Kandinsky6SRLatentUpscalerBank

    torch.manual_seed(0)
    ref = Kandinsky6SRLatentUpscalerBank(**TINY_SR_UPSCALER).eval().float()
    randomize_(ref, 5, 0.1)
    cfg = k6sr_upscaler.Kandinsky6SRUpscalerConfig.from_config(dict(ref.config))
    weights = state_arrays(ref)
    z = np.random.default_rng(0).standard_normal((1, 4, 3, 4, 6)).astype(np.float32)
    for scale in cfg.scales:
        up = k6sr_upscaler.load_upscaler(cfg, weights, scale)
        with torch.no_grad():
            want = ref(torch.from_numpy(z), scale=scale, return_dict=False)[0].numpy()
        got = np.moveaxis(np.asarray(jax.jit(lambda m, a: m(a))(up, jnp.moveaxis(z, 1, -1))), -1, 1)
        print(f"kandinsky6 sr latent upscaler x{scale}: rel {rel_l2(got, want):.3e}")
        assert got.shape == want.shape and rel_l2(got, want) <= BOUND
