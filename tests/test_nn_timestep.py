"""Core timestep embeddings (vidax_core.nn.timestep) against diffusers' get_timestep_embedding / TimestepEmbedding.

Sinusoid tolerance: the reference runs in float32 only, so the bound is fp32 rounding of the angle
``t * f`` (a few ``eps32 * |t * f|``) — cos/sin move by at most that much.
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize(
    "dim,flip,shift,scale,max_period",
    [(256, True, 0.0, 1.0, 10000.0), (64, False, 1.0, 1.0, 10000.0), (33, True, 1.0, 1.0, 10000.0),
     (32, False, 0.0, 1000.0, 10000.0), (48, True, 0.5, 1.0, 100.0)],
)
def test_matches_get_timestep_embedding(dim, flip, shift, scale, max_period):
    from diffusers.models.embeddings import get_timestep_embedding

    t = np.array([0.0, 0.5, 1.0, 17.25, 999.0, 1000.0], np.float32)
    if scale != 1.0:
        t = t / 1000.0
    ref = get_timestep_embedding(torch.from_numpy(t), dim, flip_sin_to_cos=flip, downscale_freq_shift=shift,
                                 scale=scale, max_period=max_period).numpy()
    out = np.asarray(timestep_embedding(jnp.asarray(t), dim, flip_sin_to_cos=flip, downscale_freq_shift=shift,
                                        scale=scale, max_period=max_period))
    assert out.shape == ref.shape == (len(t), dim) and out.dtype == np.float32
    tol = 8 * EPS32 * max(1.0, float(np.abs(t).max() * scale))
    err = np.abs(out - ref).max()
    assert err <= tol, (err, tol)
    if dim % 2:
        assert (out[:, -1] == 0).all()


def test_cos_first_when_flipped():
    e = np.asarray(timestep_embedding(jnp.zeros((1,)), 8, flip_sin_to_cos=True, downscale_freq_shift=0))
    np.testing.assert_array_equal(e, [[1, 1, 1, 1, 0, 0, 0, 0]])


def test_any_timestep_shape():
    """Per-token (B, S) and per-frame (B, F) timesteps embed element-wise, like the flattened reference."""
    t = jnp.asarray(np.random.default_rng(0).uniform(0, 1000, (2, 5)).astype(np.float32))
    e = timestep_embedding(t, 16, flip_sin_to_cos=True, downscale_freq_shift=0)
    flat = timestep_embedding(t.reshape(-1), 16, flip_sin_to_cos=True, downscale_freq_shift=0)
    assert e.shape == (2, 5, 16)
    np.testing.assert_array_equal(np.asarray(e).reshape(10, 16), np.asarray(flat))


@pytest.mark.parametrize("act,out_dim", [("silu", None), ("gelu", 24), ("mish", None)])
def test_mlp_matches_diffusers(act, out_dim):
    from diffusers.models.embeddings import TimestepEmbedding as Ref

    ref = Ref(32, 48, act_fn=act, out_dim=out_dim)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    ours = TimestepEmbedding(32, 48, out_dim=out_dim, act=act, rngs=nnx.Rngs(0))
    for name in ("linear_1", "linear_2"):
        lin = getattr(ref, name)
        getattr(ours, name).kernel.set_value(jnp.asarray(lin.weight.detach().numpy().T))
        getattr(ours, name).bias.set_value(jnp.asarray(lin.bias.detach().numpy()))

    x = np.random.default_rng(2).standard_normal((3, 32)).astype(np.float32)
    with torch.no_grad():
        r32 = ref(torch.from_numpy(x)).numpy()
        r64 = copy.deepcopy(ref).double()(torch.from_numpy(x).double()).numpy()
    out = np.asarray(ours(jnp.asarray(x)), np.float64)
    noise = np.abs(r32 - r64).max()
    err = np.abs(out - r64).max()
    assert err <= 4 * noise + EPS32 * np.abs(r64).max(), (err, noise)
    assert out.shape == (3, out_dim or 48)
