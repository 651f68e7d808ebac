"""Core 3-D patchify / unpatchify (vidax_core.nn.patchify): exact round trips and the references' reshape orders.

Patchify is a pure permutation of values, so every comparison with the reference's own reshape is exact (integer
valued inputs, no arithmetic); the patch embeddings (conv3d, Linear) are compared within fp32 matmul noise
measured from the reference in float64.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.nn.patchify import patchify, unpatchify

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

EPS32 = float(np.finfo(np.float32).eps)
B, C, F, H, W = 2, 3, 4, 6, 10
PATCH = (2, 3, 2)


def _video(shape=(B, C, F, H, W)) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)  # every value distinct


@pytest.mark.parametrize("order", ["thwc", "cthw", "hwtc", "wtch"])
@pytest.mark.parametrize("layout", ["cfhw", "fchw", "fhwc"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_round_trip_exact(order, layout, dtype):
    x = _video({"cfhw": (B, C, F, H, W), "fchw": (B, F, C, H, W), "fhwc": (B, F, H, W, C)}[layout])
    x = jnp.asarray(x % 251, dtype)  # exactly representable in bf16 too
    tok, grid = patchify(x, PATCH, order=order, layout=layout)
    assert grid == (F // 2, H // 3, W // 2)
    assert tok.shape == (B, 2 * 2 * 5, C * 12) and tok.dtype == dtype
    back = unpatchify(tok, grid, PATCH, order=order, layout=layout)
    np.testing.assert_array_equal(np.asarray(back, np.float32), np.asarray(x, np.float32))


def test_channel_last_is_channel_first_moved():
    """``layout="fhwc"`` tokens equal the channel-first ones of the same video (Kandinsky 5's latents)."""
    x = _video()
    last = jnp.moveaxis(jnp.asarray(x), 1, -1)
    for order in ("thwc", "cthw"):
        tok, grid = patchify(last, PATCH, order=order, layout="fhwc")
        np.testing.assert_array_equal(np.asarray(tok), np.asarray(patchify(jnp.asarray(x), PATCH, order=order)[0]))
        np.testing.assert_array_equal(np.asarray(unpatchify(tok, grid, PATCH, order=order, layout="fhwc")),
                                      np.asarray(last))


def test_orders_are_distinct():
    x = jnp.asarray(_video())
    toks = {o: np.asarray(patchify(x, PATCH, order=o)[0]) for o in ("thwc", "cthw", "hwtc")}
    assert not np.array_equal(toks["thwc"], toks["cthw"]) and not np.array_equal(toks["cthw"], toks["hwtc"])


def test_errors():
    x = jnp.zeros((1, 2, 3, 4, 4))
    with pytest.raises(ValueError, match="divisible"):
        patchify(x, (2, 2, 2))
    with pytest.raises(ValueError, match="permutation"):
        patchify(x, (1, 2, 2), order="thw")
    with pytest.raises(ValueError, match="layout"):
        patchify(x, (1, 2, 2), layout="bchw")
    with pytest.raises(ValueError, match="grid"):
        unpatchify(jnp.zeros((1, 5, 8)), (1, 2, 2), (1, 2, 2))


# ---------------------------------------------------------------------------------------------------------------
# Against the references
# ---------------------------------------------------------------------------------------------------------------


def test_ltx_pack_unpack():
    from diffusers.pipelines.ltx.pipeline_ltx import LTXPipeline

    x = _video()
    ref = LTXPipeline._pack_latents(torch.from_numpy(x), patch_size=2, patch_size_t=2)
    tok, grid = patchify(jnp.asarray(x), (2, 2, 2), order="cthw")
    np.testing.assert_array_equal(np.asarray(tok), ref.numpy())
    back_ref = LTXPipeline._unpack_latents(ref, *grid, patch_size=2, patch_size_t=2)
    np.testing.assert_array_equal(np.asarray(unpatchify(tok, grid, (2, 2, 2), order="cthw")), back_ref.numpy())


def _matmul_check(ours: np.ndarray, r32: np.ndarray, r64: np.ndarray) -> None:
    noise = np.abs(r32 - r64).max()
    err = np.abs(ours.astype(np.float64) - r64).max()
    assert err <= 4 * noise + EPS32 * np.abs(r64).max(), (err, noise)


def test_wan_conv3d_patch_embedding_is_patchify_matmul():
    """Wan's conv3d patch embedding (stride == kernel) == patchify "thwc" @ kernel flattened (pt, ph, pw, C)."""
    d = 8
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, C, F, H, W)).astype(np.float32)
    w = rng.standard_normal((d, C) + PATCH).astype(np.float32)
    r32 = torch.nn.functional.conv3d(torch.from_numpy(x), torch.from_numpy(w), stride=PATCH)
    r64 = torch.nn.functional.conv3d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=PATCH)
    r32, r64 = (r.flatten(2).transpose(1, 2).numpy() for r in (r32, r64))  # diffusers: flatten(2).transpose(1, 2)
    tok, _ = patchify(jnp.asarray(x), PATCH)
    kernel = w.transpose(2, 3, 4, 1, 0).reshape(-1, d)
    _matmul_check(np.asarray(tok @ jnp.asarray(kernel)), r32, r64)


def _wan_unpatchify_ref(h, grid, p):
    """diffusers transformer_wan.py, end of forward."""
    b = h.shape[0]
    h = h.reshape(b, *grid, *p, -1)
    h = h.permute(0, 7, 1, 4, 2, 5, 3, 6)
    return h.flatten(6, 7).flatten(4, 5).flatten(2, 3)


def _hunyuan_unpatchify_ref(h, grid, p):
    """diffusers transformer_hunyuan_video.py, end of forward (p_t, p, p)."""
    b = h.shape[0]
    h = h.reshape(b, *grid, -1, *p)
    h = h.permute(0, 4, 1, 5, 2, 6, 3, 7)
    return h.flatten(6, 7).flatten(4, 5).flatten(2, 3)


def _cosmos_unpatchify_ref(h, grid, p):
    """diffusers transformer_cosmos.py, end of forward."""
    p_t, p_h, p_w = p
    h = h.unflatten(2, (p_h, p_w, p_t, -1))
    h = h.unflatten(1, grid)
    h = h.permute(0, 7, 1, 6, 2, 4, 3, 5)
    return h.flatten(6, 7).flatten(4, 5).flatten(2, 3)


@pytest.mark.parametrize("ref_fn,order", [(_wan_unpatchify_ref, "thwc"), (_hunyuan_unpatchify_ref, "cthw"),
                                          (_cosmos_unpatchify_ref, "hwtc")])
def test_output_heads_unpatchify(ref_fn, order):
    grid = (F // PATCH[0], H // PATCH[1], W // PATCH[2])
    tok = np.arange(B * int(np.prod(grid)) * C * 12, dtype=np.float32).reshape(B, -1, C * 12)
    ref = ref_fn(torch.from_numpy(tok), grid, PATCH).numpy()
    out = np.asarray(unpatchify(jnp.asarray(tok), grid, PATCH, order=order))
    assert out.shape == (B, C, F, H, W)
    np.testing.assert_array_equal(out, ref)


def test_cosmos_patch_embed():
    from diffusers.models.transformers.transformer_cosmos import CosmosPatchEmbed

    d = 8
    ref = CosmosPatchEmbed(C, d, PATCH, bias=False)
    x = np.random.default_rng(1).standard_normal((B, C, F, H, W)).astype(np.float32)
    with torch.no_grad():
        r32 = ref(torch.from_numpy(x)).flatten(1, 3).numpy()
        r64 = ref.double()(torch.from_numpy(x).double()).flatten(1, 3).numpy()
    tok, _ = patchify(jnp.asarray(x), PATCH, order="cthw")
    kernel = ref.proj.weight.detach().float().numpy().T
    _matmul_check(np.asarray(tok @ jnp.asarray(kernel)), r32, r64)


@pytest.mark.parametrize("patch_t", [None, 2])
def test_cogvideox_patch_embed(patch_t):
    """CogVideoX latents are (B, F, C, H, W); 1.0 uses a conv2d per frame, 1.5 a Linear over (C, pt, p, p)."""
    from diffusers.models.embeddings import CogVideoXPatchEmbed

    d, p = 8, 2
    ref = CogVideoXPatchEmbed(patch_size=p, patch_size_t=patch_t, in_channels=C, embed_dim=d, text_embed_dim=4,
                              use_positional_embeddings=False, use_learned_positional_embeddings=False)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, F, C, H, W)).astype(np.float32)
    text = np.zeros((B, 0, 4), np.float32)
    with torch.no_grad():
        r32 = ref(torch.from_numpy(text), torch.from_numpy(x)).numpy()
        r64 = ref.double()(torch.from_numpy(text).double(), torch.from_numpy(x).double()).numpy()
    pt = patch_t or 1
    tok, _ = patchify(jnp.asarray(x), (pt, p, p), order="cthw", layout="fchw")
    wgt = ref.proj.weight.detach().float().numpy()
    kernel = wgt.reshape(d, -1).T  # conv2d (d, C, p, p) and Linear (d, C*pt*p*p) both flatten as (C, [pt,] p, p)
    out = tok @ jnp.asarray(kernel) + jnp.asarray(ref.proj.bias.detach().float().numpy())
    _matmul_check(np.asarray(out), r32, r64)
