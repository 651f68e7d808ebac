"""Parity of the HunyuanVideo-1.5 VAE against diffusers' AutoencoderKLHunyuanVideo15 on a tiny random model.

The tiny model has the real structure (5 blocks: 4 spatial levels, the last 2 of them also temporal, so 16x / 4x;
mid-block attention; channel-changing resnets and resamplers; the encoder's and decoder's channel shortcuts) and
is read back from its ``save_pretrained`` files. Decode and encode (mean and logvar, a clip and a single I2V
frame) and diffusers' ``enable_tiling`` decode / encode at small tile sizes that really tile. Tolerances come from
the reference's own fp32 error: the same diffusers model in float64 is the truth and vidax may be at most
``parity.FP32_FACTOR`` times as far from it as diffusers in fp32 is. Block by block, a wrong norm, padding or
pixel-shuffle order lands far outside that bound (``test_blocks_match_diffusers_and_wrong_variants_do_not``).
Ragged tile grids run their padded edge tiles through one program; without the edge fill or the attention's key
mask the padded tiles miss both the per-shape tiles and diffusers by far (max abs 0.9 to 3.5 against bounds of
1e-5 and 2e-5).
"""

from __future__ import annotations

import copy
from typing import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.checkpoint import Checkpoint  # noqa: E402
from vidax_core.io.convert import ConversionError, convert  # noqa: E402
from vidax_core.nn.state import abstract_model, flat_state  # noqa: E402
from vidax_core.testing.parity import FP32_FACTOR, fp32_bound  # noqa: E402
from vidax_core.testing.reference import randomize_scaled_  # noqa: E402
from vidax_core.testing.tiny.wan_vae_parity import check  # noqa: E402
from vidax_hunyuan import vae15 as V  # noqa: E402
from vidax_hunyuan.vae15_convert import VAE_RULES  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan15_vae")

TINY = dict(latent_channels=4, block_out_channels=[8, 8, 16, 16, 16], layers_per_block=1)

# AutoencoderKLHunyuanVideo15's defaults, which the published vae/config.json holds.
PUBLISHED = {"_class_name": "AutoencoderKLHunyuanVideo15", "block_out_channels": [128, 256, 512, 1024, 1024],
             "downsample_match_channel": True, "in_channels": 3, "latent_channels": 32, "layers_per_block": 2,
             "out_channels": 3, "scaling_factor": 1.03682, "spatial_compression_ratio": 16,
             "temporal_compression_ratio": 4, "upsample_match_channel": True}

# Tiles of 2 latents / 32 pixels, overlap factor 0.5: decode every latent, blend 16 pixels, keep 16; encode every
# 16 pixels, blend 1 latent, keep 1. The edge tiles are smaller. (The 720p defaults are checked as a plan.)
TILES = dict(tile_sample_min_height=32, tile_sample_min_width=32, tile_latent_min_height=2, tile_latent_min_width=2,
             tile_overlap_factor=0.5)


def random_vae15(config: dict):
    """AutoencoderKLHunyuanVideo15(**config), every parameter random (RMS gains near 1), activations O(1)."""
    from diffusers import AutoencoderKLHunyuanVideo15

    torch.manual_seed(0)
    return _randomize(AutoencoderKLHunyuanVideo15(**config).eval())


def _randomize(module):
    """Every parameter from torch's generator, activations O(1) (:func:`randomize_scaled_`), RMS gains near 1."""
    randomize_scaled_(module)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return module


def run_ref(model, fn: str, x: np.ndarray, tiling: dict | None = None) -> np.ndarray:
    """diffusers decode / encode (mean and logvar stacked), tiled with these ``enable_tiling`` knobs if given."""
    saved = {k: getattr(model, k) for k in (*TILES, "use_tiling")}
    if tiling:
        model.enable_tiling(**tiling)
    try:
        with torch.no_grad():
            t = torch.from_numpy(x).to(next(model.parameters()).dtype)
            if fn == "decode":
                return model.decode(t).sample.numpy()
            dist = model.encode(t).latent_dist
            return np.stack([dist.mean.numpy(), dist.logvar.numpy()])
    finally:
        for k, v in saved.items():
            setattr(model, k, v)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(reference fp32, reference fp64, the vidax autoencoder loaded from the reference's save_pretrained files)."""
    ref = random_vae15(TINY)
    root = tmp_path_factory.mktemp("hunyuan15_vae")
    ref.save_pretrained(str(root / "vae"))
    ckpt = Checkpoint(str(root))
    ae = V.load_autoencoder15(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=True)
    return ref, copy.deepcopy(ref).double(), ae


def _latents(frames: int, h: int, w: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, TINY["latent_channels"], frames, h, w)).astype(np.float32)


def _video(frames: int, h: int, w: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (1, 3, frames, h, w)).astype(np.float32)


Z = _latents(3, 2, 1)  # 9 frames of 32 x 16


def _decode(ae, z, tiling=None, on_chunk=None):
    """As the pipeline's autoencoder calls it (placed on the local devices), so that every test shares programs."""
    return V.decode(ae.vae, z, tiling=tiling, on_chunk=on_chunk, devices=jax.local_devices())


def _encode(ae, x, tiling=None):
    return np.stack(V.encode(ae.vae, x, tiling=tiling, devices=jax.local_devices()))


def test_decode_matches_diffusers(models):
    ref, ref64, ae = models
    calls = []
    got = _decode(ae, Z, on_chunk=lambda d, n: calls.append((d, n)))
    assert got.shape == (1, 3, 9, 32, 16) and got.dtype == np.float32 and calls == [(1, 1)]
    check("hunyuan1.5 decode, whole clip", got, run_ref(ref, "decode", Z), run_ref(ref64, "decode", Z))


def test_encode_matches_diffusers(models):
    """A 9-frame clip: the posterior's mean and clamped logvar. (Single frames, as image-to-video encodes them, run
    in the tiled test and the autoencoder's.)"""
    ref, ref64, ae = models
    x = _video(9, 16, 32, seed=9)
    got = _encode(ae, x)
    assert got.shape == (2, 1, TINY["latent_channels"], 3, 1, 2)
    check("hunyuan1.5 encode, 9 frames", got, run_ref(ref, "encode", x), run_ref(ref64, "encode", x))


def test_tiled_decode_matches_diffusers(models):
    """A 3 x 1 latent in 3 height tiles of 2 latents every 1 (the last 1 high), each blended over 16 pixel rows
    into the blended tile above it. (With a stride of 1 a wider latent would tile in width too, as in diffusers.)"""
    ref, ref64, ae = models
    z = _latents(3, 3, 1, seed=2)
    plan = V.decode_plan(ae.vae.cfg, (3, 1), V.tiling_options(TILES))
    assert (plan.rows, plan.cols, plan.out_blend[0], plan.out_stride[0]) == ([0, 1, 2], [0], 16, 16)
    got = _decode(ae, z, tiling=TILES)
    expected = run_ref(ref, "decode", z, TILES)
    assert got.shape == expected.shape == (1, 3, 9, 48, 16)
    check("hunyuan1.5 tiled decode", got, expected, run_ref(ref64, "decode", z, TILES))
    untiled = run_ref(ref, "decode", z)
    print(f"tiled vs untiled reference: max abs {np.abs(expected - untiled).max():.3f}")
    assert np.abs(expected - untiled).max() > 1e-2  # the tiles really are blended, not one pass


def test_tiled_encode_matches_diffusers(models):
    """A 16 x 48 image (one frame) in 3 width tiles of 32 pixels every 16 (the last 16 wide), blended over 1 latent
    column."""
    ref, ref64, ae = models
    x = _video(1, 16, 48, seed=5)
    plan = V.encode_plan(ae.vae.cfg, (16, 48), V.tiling_options(TILES))
    assert (plan.rows, plan.cols, plan.out_blend[1], plan.out_stride[1]) == ([0], [0, 16, 32], 1, 1)
    got = _encode(ae, x, tiling=TILES)
    check("hunyuan1.5 tiled encode", got, run_ref(ref, "encode", x, TILES), run_ref(ref64, "encode", x, TILES))


# Tiles of 4 latents / 64 pixels every 3 latents / 48 pixels (overlap 0.25), decode blended over 16 pixels, encode over
# 1 latent. A 5 x 5 latent (80 x 80 pixels) is a 2 x 2 grid whose bottom row and right column hold 2 latents / 32
# pixels of the 4 / 64 (5 is no multiple of 3): four tile shapes, padded to one. The padding reaches the real area
# through every 3x3 conv and holds keys of the mid-block attention (4 x 4 latents, 2 x 2 of them real).
RAGGED = dict(tile_sample_min_height=64, tile_sample_min_width=64, tile_latent_min_height=4, tile_latent_min_width=4,
              tile_overlap_factor=0.25)
#: Padded vs per-shape tiles, both vidax fp32: the same arithmetic on the real area, in other XLA programs.
PAD_NOISE = 1e-5


@pytest.fixture(scope="module")
def ragged(models):
    """(latents, pixels, and per direction: padded result, its compiles, per-shape result, its compiles); padded is
    what :func:`V.decode` / :func:`V.encode` do, per-shape is ``run_tiled`` without ``pad_tiles`` (one program per
    tile shape)."""
    from vidax_core.testing.counters import Counters
    from vidax_core.vae.chunks import chunk_runner, gaussian_posterior
    from vidax_core.vae.tiling import run_tiled

    _, _, ae = models
    vae, devs = ae.vae, jax.local_devices()
    z, x = _latents(3, 5, 5, seed=6), _video(1, 80, 80, seed=8)

    def per_shape(program, xx, plan):
        return run_tiled(xx, chunk_runner(vae, program, streams=False), plan=plan, bounds=[(0, xx.shape[1])],
                         devices=devs)

    def counted(fn):
        with pytest.MonkeyPatch.context() as mp:
            c = Counters(mp)
            out = fn()
            return out, c.compiles

    opts = V.tiling_options(RAGGED)
    dplan, eplan = V.decode_plan(vae.cfg, (5, 5), opts), V.encode_plan(vae.cfg, (80, 80), opts)
    assert (dplan.rows, dplan.cols, dplan.tile, eplan.rows, eplan.cols, eplan.tile) == ([0, 3], [0, 3], (4, 4),
                                                                                        [0, 48], [0, 48], (64, 64))
    zz, xx = np.moveaxis(z, 1, -1), np.moveaxis(x, 1, -1)
    out = dict(z=z, x=x)
    out["decode"] = counted(lambda: _decode(ae, z, tiling=RAGGED))
    out["decode_per_shape"] = counted(lambda: np.moveaxis(per_shape(V._decode_program, zz, dplan), -1, 1))
    out["encode"] = counted(lambda: _encode(ae, x, tiling=RAGGED))
    out["encode_per_shape"] = counted(
        lambda: np.stack(gaussian_posterior(per_shape(V._encode_program, xx, eplan), TINY["latent_channels"])))
    return out


def test_padded_edge_tiles_match_unpadded_and_diffusers(models, ragged):
    """Edge tiles padded to the tile shape give, on their real area, what the unpadded tiles give (decode and
    encode), and the blended result is diffusers' tiled decode / encode."""
    ref, ref64, _ = models
    for fn, data in (("decode", ragged["z"]), ("encode", ragged["x"])):
        (got, _), (alone, _) = ragged[fn], ragged[fn + "_per_shape"]
        assert got.shape == alone.shape
        diff = np.abs(got - alone).max()
        print(f"hunyuan1.5 tiled {fn}, padded vs per-shape tiles: max abs {diff:.2e} "
              f"(|out| max {np.abs(alone).max():.2f})")
        assert diff <= PAD_NOISE, (fn, diff)
        check(f"hunyuan1.5 ragged tiled {fn}", got, run_ref(ref, fn, data, RAGGED), run_ref(ref64, fn, data, RAGGED))


def test_ragged_tile_grid_compiles_one_program(ragged):
    """The 2 x 2 ragged grid: one compile for the padded decode (and encode), against one per tile shape (four)
    for unpadded tiles."""
    counts = {k: ragged[k][1] for k in ("decode", "decode_per_shape", "encode", "encode_per_shape")}
    print(f"compiles: {counts}")
    assert counts["decode"] == counts["encode"] == 1, counts
    assert counts["decode_per_shape"] == counts["encode_per_shape"] == 4, counts


def test_autoencoder_interface(models):
    """The pipeline's view: DiT latents (times scaling_factor) -> [0, 1] frames channel-last, and back."""
    ref, _, ae = models
    assert ae.scaling_factor == pytest.approx(1.03682)
    assert ae.latent_shape(121, 720, 1280) == (31, 45, 80)
    assert V.latent_grid15(PUBLISHED, 33, 480, 848) == (9, 30, 53)
    frames = ae.decode_video(Z * np.float32(ae.scaling_factor))
    expected = np.clip(run_ref(ref, "decode", Z) / 2 + 0.5, 0, 1).transpose(0, 2, 3, 4, 1)
    assert frames.shape == (1, 9, 32, 16, 3)
    np.testing.assert_allclose(frames, expected, atol=1e-4)
    image = np.random.default_rng(7).uniform(0, 1, (1, 1, 16, 16, 3)).astype(np.float32)
    lat = ae.encode_video(image)
    mean = run_ref(ref, "encode", np.ascontiguousarray(image.transpose(0, 4, 1, 2, 3)) * 2 - 1)[0]
    np.testing.assert_allclose(lat, mean * np.float32(ae.scaling_factor), atol=1e-4)


def _block_pair(theirs, ours, x: np.ndarray) -> tuple[Callable[[], np.ndarray], np.ndarray, np.ndarray]:
    """A randomised diffusers block (fp32 and fp64 runs on channel-first ``x``) and ours given its weights: (ours
    as a function of ``x``, reference fp32, reference fp64)."""
    from vidax_core.io.convert import conv

    _randomize(theirs)
    for name, p in theirs.state_dict().items():
        path = name.replace(".conv.weight", ".weight").replace(".conv.bias", ".bias").split(".")
        obj = ours
        for part in path[:-1]:
            obj = getattr(obj, part)
        leaf = {"weight": "kernel", "gamma": "gamma", "bias": "bias"}[path[-1]]
        w = p.numpy()
        getattr(obj, leaf)[...] = jnp.asarray(conv(w) if leaf == "kernel" else w.reshape(-1))
    with torch.no_grad():
        r32 = theirs(torch.from_numpy(x.astype(np.float32))).numpy()
        r64 = theirs.double()(torch.from_numpy(x)).numpy()

    def run() -> np.ndarray:
        y = jax.jit(lambda a: ours(a))(jnp.asarray(np.moveaxis(x, 1, -1), jnp.float32))
        return np.moveaxis(np.asarray(y), -1, 1)

    return run, r32, r64


def test_blocks_match_diffusers_and_wrong_variants_do_not(monkeypatch):
    """The bound fails wrong blocks. A space-time upsampler and a resnet equal their diffusers modules within the
    fp32 bound, and a wrong variant of each lands far past it: the other pixel-shuffle channel order, GroupNorm-like
    mean-subtracted norms, zero instead of replicated time padding (run eagerly; the whole-model tests cover every
    block kind)."""
    from diffusers.models.autoencoders import autoencoder_kl_hunyuanvideo15 as D

    import vidax_hunyuan.vae15_blocks as B
    import vidax_core.vae.hunyuan_blocks as B10
    from vidax_core.testing.parity import assert_fp32_parity
    from vidax_core.vae import pixel_shuffle
    from vidax_core.vae.wan21 import RMSNorm

    rng = np.random.default_rng(4)
    torch.manual_seed(1)

    def variant_misses(label, run, r32, r64, patch) -> None:
        bound = fp32_bound(r32, r64, 0.0)
        with monkeypatch.context() as m:
            patch(m)
            err = np.abs(run() - r64).max()
        print(f"{label}: max abs {err:.3e} vs bound {bound:.3e}")
        assert err > 100 * bound, label

    run, r32, r64 = _block_pair(D.HunyuanVideo15Upsample(16, 16, True), B.Upsample(16, 16, True),
                                rng.standard_normal((1, 16, 3, 2, 2)))
    assert_fp32_parity("upsample space-time", run(), r32, r64, vidax_err=0.0, factor=FP32_FACTOR)
    variant_misses("upsample space-time, factor-minor shuffle", run, r32, r64, lambda m: m.setattr(
        B, "depth_to_space", lambda x, f: pixel_shuffle.depth_to_space(x, f, factor_major=False)))

    run, r32, r64 = _block_pair(D.HunyuanVideo15ResnetBlock(8, 8), B.ResnetBlock(8, 8),
                                rng.standard_normal((1, 8, 3, 4, 4)))
    assert_fp32_parity("resnet", run(), r32, r64, vidax_err=0.0, factor=FP32_FACTOR)
    norm_call, pad = RMSNorm.__call__, jnp.pad

    def centred(self, x):
        return norm_call(self, x - x.mean(axis=-1, keepdims=True))

    def zero_time_pad(x, widths, mode="constant", **kw):
        y = pad(x, widths, mode=mode, **kw)
        return y.at[:, : widths[1][0]].set(0.0) if mode == "edge" and widths[1][0] else y

    variant_misses("resnet, mean-subtracted norm", run, r32, r64, lambda m: m.setattr(RMSNorm, "__call__", centred))
    variant_misses("resnet, zero time padding", run, r32, r64, lambda m: m.setattr(B10.jnp, "pad", zero_time_pad))

    x = jnp.asarray(rng.standard_normal((1, 2, 4, 4, 3)), jnp.float32)
    for major in (True, False):
        y = pixel_shuffle.space_to_depth(x, (2, 2, 2), factor_major=major)
        assert np.array_equal(np.asarray(pixel_shuffle.depth_to_space(y, (2, 2, 2), factor_major=major)), x)


def test_decode_only_build_bad_input_and_knobs(models, tmp_path):
    ref, _, ae = models
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    cfg = ae.vae.cfg
    dec = V.load_vae15(cfg, tensors, with_encoder=False)
    assert dec.encoder is None
    full, part = flat_state(ae.vae), flat_state(dec)
    assert set(part) == {k for k in full if k[0] == "decoder"}
    for k, v in part.items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(full[k]))
    with pytest.raises(ValueError, match="without its encoder"):
        V.encode(dec, _video(1, 32, 32))
    with pytest.raises(UserError, match="latents"):
        V.decode(ae.vae, Z[:, :2])
    with pytest.raises(UserError, match="1 \\+ 4k frames"):
        V.encode(ae.vae, _video(4, 32, 32))
    with pytest.raises(UserError, match="do not apply"):
        V.decode(ae.vae, Z, tiling={"tile_sample_stride_height": 8})
    with pytest.raises(UserError, match="tile_latent_min_height"):  # diffusers keeps the latent tile at 16 here
        V.decode(ae.vae, _latents(1, 40, 2), tiling={"tile_sample_min_height": 512})
    with pytest.raises(UserError, match="multiples"):
        V.encode(ae.vae, _video(1, 64, 32), tiling=dict(TILES, tile_sample_min_height=40))
    with pytest.raises(UserError, match="block_out_channels"):
        V.HunyuanVAE15Config.from_config({**TINY, "block_out_channels": [8, 8, 16, 16]})
    with pytest.raises(ConversionError):
        V.load_vae15(cfg, {k: v for k, v in tensors.items() if "mid_block.attentions" not in k})


def _keys_match(config: dict) -> int:
    """diffusers builds ``config`` on the meta device; its key -> shape list is exactly what vidax's table expects
    from the abstract vidax VAE. Returns the parameter count."""
    from diffusers import AutoencoderKLHunyuanVideo15

    with torch.device("meta"):
        ref = AutoencoderKLHunyuanVideo15.from_config(config)
    zero = np.zeros((), np.float32)
    shapes = {k: np.broadcast_to(zero, tuple(v.shape)) for k, v in ref.state_dict().items()}
    _, _, flat = abstract_model(lambda: V.HunyuanVAE15(V.HunyuanVAE15Config.from_config(config)))
    convert(shapes, VAE_RULES, flat, component="vae", check_only=True)
    n = sum(int(np.prod(v.shape)) for v in flat.values())
    assert n == sum(int(np.prod(v.shape)) for v in ref.state_dict().values())
    return n


def test_full_size_published_config_matches_diffusers_keys():
    """The published config key for key (and a layout whose resnets change width, hence ``conv_shortcut``); the
    720p ``enable_tiling()`` decode plan: 16-latent tiles every 12, blended over 64 pixels, 4 x 7 of them."""
    n = _keys_match(PUBLISHED)
    print(f"full-size HunyuanVideo-1.5 VAE: {n / 1e6:.2f}M params")
    _keys_match({**TINY, "downsample_match_channel": False, "upsample_match_channel": False})
    plan = V.decode_plan(V.HunyuanVAE15Config.from_config(PUBLISHED), (45, 80), V.tiling_options(True))
    assert (plan.tile, plan.stride, plan.out_blend, plan.out_stride) == ((16, 16), (12, 12), (64, 64), (192, 192))
    assert plan.num_tiles == 4 * 7 and plan.out_size == (720, 1280)
