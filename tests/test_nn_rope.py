"""Core RoPE (vidax_core.nn.rope) against diffusers' and transformers' rotary embeddings (torch: test-only oracle).

Tolerances come from float32 rounding: an angle ``a`` computed in fp32 carries an error of a few ``eps32 * |a|``,
so cos/sin tables may differ by that much; a rotation of ``x`` in fp32 by a few ``eps32 * |x|``. Where the
reference has a float64 path, its own fp32-vs-fp64 difference is the noise floor.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.nn import rope

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")

EPS32 = float(np.finfo(np.float32).eps)


def _angle_tol(max_angle: float) -> float:
    return 8 * EPS32 * max(1.0, float(max_angle))


def _x_tol(x: np.ndarray) -> float:
    return 8 * EPS32 * float(np.abs(x).max())


def _interleave(t: np.ndarray) -> np.ndarray:
    return np.repeat(np.asarray(t), 2, axis=-1)


def _halves(t: np.ndarray) -> np.ndarray:
    t = np.asarray(t)
    return np.concatenate([t, t], axis=-1)


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


# ---------------------------------------------------------------------------------------------------------------
# 1-D tables (diffusers get_1d_rotary_pos_embed)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("repeat_interleave_real", [True, False])
@pytest.mark.parametrize("ntk_factor,linear_factor", [(1.0, 1.0), (3.7, 1.0), (1.0, 2.5), (2.0, 0.5)])
@pytest.mark.parametrize("fractional", [False, True])
def test_1d_table_matches_diffusers(repeat_interleave_real, ntk_factor, linear_factor, fractional):
    from diffusers.models.embeddings import get_1d_rotary_pos_embed

    dim, theta = 24, 256.0
    pos = np.linspace(0.0, 37.3, 29) if fractional else np.arange(29, dtype=np.float64)
    kw = dict(theta=theta, use_real=True, ntk_factor=ntk_factor, linear_factor=linear_factor,
              repeat_interleave_real=repeat_interleave_real)
    c32, s32 = (_np(t) for t in get_1d_rotary_pos_embed(dim, pos.astype(np.float32), **kw))
    c64, s64 = (_np(t) for t in get_1d_rotary_pos_embed(dim, pos, freqs_dtype=torch.float64, **kw))

    expand = _interleave if repeat_interleave_real else _halves
    f = rope.inv_freq(dim, theta, ntk_factor=ntk_factor, linear_factor=linear_factor)
    for ang in (rope.host_angles(pos, f), rope.angles(pos, f)):
        c, s = (expand(np.asarray(t)) for t in rope.cos_sin(ang))
        noise = max(np.abs(c32 - c64).max(), np.abs(s32 - s64).max())
        tol = max(4 * noise, _angle_tol(np.abs(np.asarray(ang)).max()))
        assert np.abs(c - c32).max() <= tol and np.abs(s - s32).max() <= tol
        # against the reference's float64 path our host float64 table is exact up to the final fp32 rounding
        if isinstance(ang, np.ndarray):
            assert np.abs(c - c64).max() <= EPS32 and np.abs(s - s64).max() <= EPS32


# ---------------------------------------------------------------------------------------------------------------
# Apply, both pairings (diffusers apply_rotary_emb)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [True, False])
def test_apply_matches_diffusers(interleaved):
    from diffusers.models.embeddings import apply_rotary_emb, get_1d_rotary_pos_embed

    b, h, s, d = 2, 3, 11, 16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, h, s, d)).astype(np.float32)
    cos_t, sin_t = get_1d_rotary_pos_embed(d, s, theta=10000.0, use_real=True, repeat_interleave_real=interleaved)
    ref = _np(apply_rotary_emb(torch.from_numpy(x), (cos_t, sin_t), use_real=True,
                               use_real_unbind_dim=-1 if interleaved else -2))

    c, sn = rope.cos_sin(rope.host_angles(s, rope.inv_freq(d)))
    ours = np.asarray(rope.apply(jnp.asarray(x), c, sn, interleaved=interleaved))  # table (S, P) vs x (B, H, S, D)
    err = np.abs(ours - ref).max()
    assert err <= _x_tol(x), err
    # rotations preserve each pair's norm
    np.testing.assert_allclose(np.linalg.norm(ours, axis=-1), np.linalg.norm(x, axis=-1), rtol=16 * EPS32)


def test_wrong_pairing_differs():
    """The two pairings are genuinely different (the parity tests above can fail)."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((5, 8)).astype(np.float32))
    c, s = rope.cos_sin(rope.host_angles(5, rope.inv_freq(8)))
    a = rope.apply_interleaved(x, c, s)
    b = rope.apply_rotate_half(x, c, s)
    assert float(jnp.abs(a - b).max()) > 0.1


def test_partial_rotary_passes_tail_through():
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((2, 7, 3, 16)).astype(np.float32))
    c, s = rope.cos_sin(rope.host_angles(7, rope.inv_freq(8)))  # rotates 8 of 16 features
    for fn in (rope.apply_interleaved, rope.apply_rotate_half):
        out = fn(x, c[:, None], s[:, None])
        np.testing.assert_array_equal(np.asarray(out[..., 8:]), np.asarray(x[..., 8:]))
        np.testing.assert_allclose(np.asarray(out[..., :8]), np.asarray(fn(x[..., :8], c[:, None], s[:, None])))
    with pytest.raises(ValueError):
        rope.apply_interleaved(x[..., :6], c, s)


def test_bf16_in_bf16_out():
    x = jnp.ones((4, 8), jnp.bfloat16)
    c, s = rope.cos_sin(rope.host_angles(4, rope.inv_freq(8)))
    assert rope.apply_interleaved(x, c, s).dtype == jnp.bfloat16


# ---------------------------------------------------------------------------------------------------------------
# 3-D grids: Wan, CogVideoX (fractional), Cosmos (NTK per axis, seconds-based time), LTX (fractional, mixed)
# ---------------------------------------------------------------------------------------------------------------


def test_wan_grid_matches_diffusers():
    from diffusers.models.transformers.transformer_wan import WanRotaryPosEmbed

    head_dim, patch, grid = 40, (1, 2, 2), (3, 4, 5)
    ref = WanRotaryPosEmbed(head_dim, patch, max_seq_len=64)
    hs = torch.zeros(1, 4, grid[0] * patch[0], grid[1] * patch[1], grid[2] * patch[2])
    out = ref(hs)
    ang = rope.grid_angles(list(grid), rope.split_axes_wan(head_dim))
    c, s = rope.cos_sin(ang)
    if isinstance(out, tuple):  # (cos, sin), each (1, S, 1, D) with interleaved repeats
        rc, rs = (_np(t).reshape(-1, head_dim) for t in out)
    else:  # complex (1, 1, S, D/2)
        o = _np(out).reshape(-1, head_dim // 2)
        rc, rs = _interleave(o.real), _interleave(o.imag)
    tol = _angle_tol(np.abs(ang).max())
    assert np.abs(_interleave(c) - rc).max() <= tol and np.abs(_interleave(s) - rs).max() <= tol


def test_cogvideox_grid_matches_diffusers():
    from diffusers.models.embeddings import get_3d_rotary_pos_embed

    head_dim, t, gh, gw = 64, 3, 4, 6
    crops = ((0, 0), (5, 9))  # CogVideoX's get_resize_crop_region_for_grid-style box
    rc, rs = (_np(x) for x in get_3d_rotary_pos_embed(head_dim, crops, (gh, gw), t, theta=10000))
    pos_h = np.linspace(crops[0][0], crops[1][0] * (gh - 1) / gh, gh)
    pos_w = np.linspace(crops[0][1], crops[1][1] * (gw - 1) / gw, gw)
    pos_t = np.linspace(0, t * (t - 1) / t, t)
    ang = rope.grid_angles([pos_t, pos_h, pos_w], rope.split_axes_cogvideox(head_dim))
    c, s = rope.cos_sin(ang)
    tol = _angle_tol(np.abs(ang).max())
    assert np.abs(_interleave(c) - rc).max() <= tol and np.abs(_interleave(s) - rs).max() <= tol


@pytest.mark.parametrize("fps", [None, 16])
def test_cosmos_grid_matches_diffusers(fps):
    from diffusers.models.transformers.transformer_cosmos import CosmosRotaryPosEmbed

    head_dim, patch, rope_scale, base_fps = 48, (1, 2, 2), (2.0, 1.3, 0.8), 24
    ref = CosmosRotaryPosEmbed(head_dim, max_size=(16, 32, 32), patch_size=patch, base_fps=base_fps,
                               rope_scale=rope_scale)
    grid = (3, 4, 5)
    hs = torch.zeros(1, 4, grid[0] * patch[0], grid[1] * patch[1], grid[2] * patch[2])
    rc, rs = (_np(x) for x in ref(hs, fps=fps))

    dims = rope.split_axes_wan(head_dim)
    ntk = [r ** (d / (d - 2)) for r, d in zip(rope_scale, dims)]
    t_pos = np.arange(grid[0], dtype=np.float64)
    if fps is not None:
        t_pos = t_pos / fps * base_fps  # time in seconds, in units of the base frame rate
    ang = rope.grid_angles([t_pos, grid[1], grid[2]], dims, ntk_factors=ntk)
    c, s = rope.cos_sin(ang)
    tol = _angle_tol(np.abs(ang).max())
    assert np.abs(_halves(c) - rc).max() <= tol and np.abs(_halves(s) - rs).max() <= tol
    # and the jax (traced positions) path agrees with the host path
    ang_j = rope.grid_angles([jnp.asarray(t_pos), grid[1], grid[2]], dims, ntk_factors=ntk, host=False)
    assert np.abs(np.asarray(ang_j) - ang).max() <= _angle_tol(np.abs(ang).max())


@pytest.mark.parametrize("head_dim", [48, 52])  # 52 % 6 != 0: the reference pads identity pairs in front
def test_ltx_angles_match_diffusers(head_dim):
    from diffusers.models.transformers.transformer_ltx import (
        LTXVideoRotaryPosEmbed,
        apply_rotary_emb,
    )

    f, h, w = 3, 4, 5
    ref = LTXVideoRotaryPosEmbed(head_dim, base_num_frames=20, base_height=2048, base_width=2048,
                                 patch_size=1, patch_size_t=1, theta=10000.0)
    scale = (8 / 25.0, 32.0, 32.0)  # (vae temporal ratio / frame rate, spatial ratio, spatial ratio)
    hs = torch.zeros(2, f * h * w, head_dim)
    rc, rs = (_np(x) for x in ref(hs, f, h, w, rope_interpolation_scale=scale))

    gf, gh, gw = np.meshgrid(np.arange(f), np.arange(h), np.arange(w), indexing="ij")
    coords = np.stack([gf.ravel() * scale[0] / 20, gh.ravel() * scale[1] / 2048, gw.ravel() * scale[2] / 2048], -1)
    ang = rope.ltx_angles(jnp.asarray(coords[None].repeat(2, 0), jnp.float32), head_dim)
    c, s = rope.cos_sin(ang)
    tol = _angle_tol(float(np.abs(np.asarray(ang)).max()))
    assert np.abs(_interleave(c) - rc).max() <= tol and np.abs(_interleave(s) - rs).max() <= tol

    x = np.random.default_rng(3).standard_normal((2, f * h * w, head_dim)).astype(np.float32)
    out_ref = _np(apply_rotary_emb(torch.from_numpy(x), (torch.from_numpy(rc), torch.from_numpy(rs))))
    out = np.asarray(rope.apply_interleaved(jnp.asarray(x), c, s))
    assert np.abs(out - out_ref).max() <= _x_tol(x) + 2 * tol * np.abs(x).max()


# ---------------------------------------------------------------------------------------------------------------
# Decoder LLMs: Llama-3 frequency scaling, Qwen2.5-VL mRoPE (transformers)
# ---------------------------------------------------------------------------------------------------------------


def test_llama3_inv_freq_and_apply_match_transformers():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    params = dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=64)  # small context so all three bands are populated
    cfg = LlamaConfig(hidden_size=128, num_attention_heads=2, head_dim=64, max_position_embeddings=512,
                      rope_parameters=params)
    emb = LlamaRotaryEmbedding(cfg)
    scaling = rope.Llama3Scaling(8.0, 1.0, 4.0, 64)
    f = rope.inv_freq(64, 500000.0, llama3=scaling)
    ref_f = _np(emb.inv_freq).astype(np.float64)
    wavelen = 2 * math.pi / rope.inv_freq(64, 500000.0)
    assert (wavelen > 64).any() and (wavelen < 16).any() and ((wavelen > 16) & (wavelen < 64)).any()
    np.testing.assert_allclose(f, ref_f, rtol=4 * EPS32, atol=0)
    assert np.abs(f - rope.inv_freq(64, 500000.0)).max() > 0  # the scaling changed something

    b, h, s, d = 2, 2, 9, 64
    rng = np.random.default_rng(4)
    pos = np.stack([np.arange(s), np.arange(s) + 300])  # (B, S) position ids, one batch row far out
    q = rng.standard_normal((b, h, s, d)).astype(np.float32)
    cos_r, sin_r = emb(torch.from_numpy(q), torch.from_numpy(pos))
    q_ref, _ = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(q), cos_r, sin_r)
    c, sn = rope.cos_sin(rope.angles(jnp.asarray(pos), f))  # (B, S, P)
    out = np.asarray(rope.apply_rotate_half(jnp.asarray(q), c[:, None], sn[:, None]))
    tol = _angle_tol(float(pos.max() * f.max()))
    assert np.abs(_halves(np.asarray(c)) - _np(cos_r)).max() <= tol
    assert np.abs(out - _np(q_ref)).max() <= _x_tol(q) + 2 * tol * np.abs(q).max()


def test_qwen25vl_mrope_matches_transformers():
    from transformers import Qwen2_5_VLTextConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VLRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    section = [4, 6, 6]
    cfg = Qwen2_5_VLTextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1,
                               max_position_embeddings=256,
                               rope_parameters=dict(rope_type="default", rope_theta=10000.0, mrope_section=section))
    emb = Qwen2_5_VLRotaryEmbedding(cfg)
    b, h, s, d = 2, 2, 10, 32
    rng = np.random.default_rng(5)
    pos = rng.integers(0, 40, size=(3, b, s))  # distinct t/h/w streams, so a wrong section choice shows
    q = rng.standard_normal((b, h, s, d)).astype(np.float32)
    cos_r, sin_r = emb(torch.from_numpy(q), torch.from_numpy(pos))
    q_ref, _ = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(q), cos_r, sin_r)

    f = rope.inv_freq(d, 10000.0)
    np.testing.assert_allclose(f, _np(emb.inv_freq), rtol=4 * EPS32)
    ang = rope.mrope_angles(jnp.asarray(pos), f, section)
    c, sn = rope.cos_sin(ang)
    tol = _angle_tol(float(pos.max()))
    assert np.abs(_halves(np.asarray(c)) - _np(cos_r)).max() <= tol
    assert np.abs(_halves(np.asarray(sn)) - _np(sin_r)).max() <= tol
    out = np.asarray(rope.apply_rotate_half(jnp.asarray(q), c[:, None], sn[:, None]))
    assert np.abs(out - _np(q_ref)).max() <= _x_tol(q) + 2 * tol * np.abs(q).max()
    with pytest.raises(ValueError):
        rope.mrope_angles(jnp.asarray(pos), f, [4, 4, 4])
