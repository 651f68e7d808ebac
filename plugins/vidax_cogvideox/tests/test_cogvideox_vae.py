"""Parity of the CogVideoX VAE against diffusers' AutoencoderKLCogVideoX on a tiny random model (torch is the oracle).

Decode and encode, untiled and tiled, over several frame batches (so the causal-conv cache crosses batches).
Tolerances come from the reference's own fp32 error: the same diffusers model in float64 is the truth, and vidax may
be at most ``FACTOR`` times as far from it as diffusers in fp32 is (``vidax_core.testing.tiny.wan_vae_parity.check``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.testing.reference import randomize_scaled_  # noqa: E402
from vidax_core.testing.tiny.wan_vae_parity import check, errors  # noqa: E402

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.checkpoint import Checkpoint  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.vae import tiling as tiling_mod  # noqa: E402
from vidax_core.vae.tiling import TilingOptions  # noqa: E402
from vidax_cogvideox import vae as V  # noqa: E402

pytestmark = pytest.mark.xdist_group("cogvideox_vae")

TINY = dict(
    block_out_channels=[8, 8, 16, 16],  # 8x spatial, like the real VAE
    down_block_types=["CogVideoXDownBlock3D"] * 4,
    up_block_types=["CogVideoXUpBlock3D"] * 4,
    latent_channels=4,
    layers_per_block=1,
    norm_num_groups=4,
    norm_eps=1e-5,
    temporal_compression_ratio=4,
    sample_height=32,  # enable_tiling()'s default tiles: 16 x 24 pixels
    sample_width=48,
    scaling_factor=0.7,
)

#: Tiles of 3 x 4 latents starting every 2 x 3 latents, blended over 8 x 8 pixels, cropped to 16 x 24.
DECODE_TILES = dict(tile_sample_min_height=24, tile_sample_min_width=32, tile_overlap_factor_height=1 / 3,
                    tile_overlap_factor_width=1 / 4)


def _random_vae(config: dict):
    """diffusers AutoencoderKLCogVideoX with every parameter random (norm gains and biases too), activations O(1)."""
    torch.manual_seed(0)
    ref = diffusers.AutoencoderKLCogVideoX(**config).eval()
    randomize_scaled_(ref)
    return ref


def _run(model, fn: str, x: np.ndarray, tiling=None):
    """diffusers decode -> sample / encode -> (mean, logvar) on a copy (enable_tiling keeps its values), tiled as
    given (True: ``enable_tiling()``'s defaults); float64 when the model is."""
    m = copy.deepcopy(model)
    if tiling is True:
        m.enable_tiling()
    elif tiling:
        m.enable_tiling(**tiling)
    dtype = next(m.parameters()).dtype
    with torch.no_grad():
        t = torch.from_numpy(x).to(dtype)
        if fn == "decode":
            return m.decode(t).sample.numpy()
        dist = m.encode(t).latent_dist
        return dist.mean.numpy(), dist.logvar.numpy()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(reference fp32, reference fp64, config, vidax VAE loaded from the reference's save_pretrained files)."""
    ref = _random_vae(TINY)
    root = tmp_path_factory.mktemp("cogvideox_vae")
    ref.save_pretrained(str(root / "vae"))
    ckpt = Checkpoint(str(root))
    cfg = V.CogVideoXVAEConfig.from_config(ckpt.config("vae"))
    return ref, copy.deepcopy(ref).double(), cfg, V.load_vae(cfg, ckpt.tensors("vae"), with_encoder=True)


def _latents(shape, seed=1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _video(shape, seed=2) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_config_from_published_json():
    """The published 5B / 1.5 vae/config.json fields; an architecture vidax does not build is one error line."""
    five_b = {"_class_name": "AutoencoderKLCogVideoX", "_diffusers_version": "0.31.0.dev0", "act_fn": "silu",
              "block_out_channels": [128, 256, 256, 512], "down_block_types": ["CogVideoXDownBlock3D"] * 4,
              "dropout": 0.0, "force_upcast": True, "in_channels": 3, "latent_channels": 16, "latents_mean": None,
              "latents_std": None, "layers_per_block": 3, "norm_eps": 1e-06, "norm_num_groups": 32,
              "out_channels": 3, "sample_height": 480, "sample_width": 720, "scaling_factor": 0.7,
              "shift_factor": None, "temporal_compression_ratio": 4, "up_block_types": ["CogVideoXUpBlock3D"] * 4,
              "use_post_quant_conv": False, "use_quant_conv": False}
    cfg = V.CogVideoXVAEConfig.from_config(five_b)
    assert cfg.scaling_factor == 0.7 and not cfg.invert_scale_latents and cfg.spatial_ratio == 8
    assert cfg.time_levels == 2 and cfg.block_out_channels == (128, 256, 256, 512)
    cfg15 = V.CogVideoXVAEConfig.from_config({**five_b, "invert_scale_latents": True})
    assert cfg15.invert_scale_latents and cfg15.scaling_factor == 0.7
    with pytest.raises(UserError, match="use_quant_conv"):
        V.CogVideoXVAEConfig.from_config({**five_b, "use_quant_conv": True})
    with pytest.raises(UserError, match="temporal_compression_ratio"):
        V.CogVideoXVAEConfig.from_config({**five_b, "temporal_compression_ratio": 3})


def test_frame_batches_are_the_reference():
    assert V.frame_batches(13, 2) == [(0, 3), (3, 5), (5, 7), (7, 9), (9, 11), (11, 13)]
    assert V.frame_batches(12, 2) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12)]
    assert V.frame_batches(1, 2) == [(0, 1)]
    assert V.frame_batches(49, 8) == [(0, 9), (9, 17), (17, 25), (25, 33), (33, 41), (41, 49)]
    assert V.frame_batches(5, 8) == [(0, 5)]


@pytest.fixture(scope="module")
def untiled(models):
    """5 latent frames (batches of 3 and 2): latents, the reference's fp32 and fp64 decodes."""
    ref, ref64, _, _ = models
    z = _latents((1, 4, 5, 2, 3))
    return z, _run(ref, "decode", z), _run(ref64, "decode", z)


def test_decode_matches_diffusers(models, untiled):
    """Two frame batches with the conv cache carried across: 17 frames."""
    vae = models[3]
    z, expected, truth = untiled
    calls = []
    got = V.decode(vae, z, on_chunk=lambda d, n: calls.append((d, n)))
    assert got.shape == expected.shape == (1, 3, 17, 16, 24) and got.dtype == np.float32
    assert calls == [(1, 2), (2, 2)]
    check("decode", got, expected, truth)


def test_decode_frame_batches_matter(models, untiled, monkeypatch):
    """The batching is part of the result (GroupNorm spans a batch): all frames at once misses the reference."""
    vae = models[3]
    z, expected, truth = untiled
    monkeypatch.setattr(V, "DECODE_FRAME_BATCH", 5)
    wrong = V.decode(vae, z)
    assert wrong.shape == expected.shape
    print(f"one batch of 5 latent frames: max abs vs fp64 {errors(wrong, truth)[0]:.3e}")
    assert errors(wrong, truth)[0] > 100 * errors(expected, truth)[0]


@pytest.fixture(scope="module")
def tiled(models):
    """Tiles and overlaps in both directions (5 x 7 latents: 3 x 3 tiles), 3 latent frames (one batch; the conv
    cache across batches of a tile is the core runner's, tested with the Wan VAEs): latents, the reference's fp32
    and fp64 decodes."""
    ref, ref64, _, _ = models
    z = _latents((1, 4, 3, 5, 7), seed=3)
    return z, _run(ref, "decode", z, DECODE_TILES), _run(ref64, "decode", z, DECODE_TILES)


def test_decode_tiled_matches_diffusers(models, tiled):
    cfg, vae = models[2:]
    z, expected, truth = tiled
    plan = V.decode_plan(cfg, (5, 7), DECODE_TILES)
    assert (plan.rows, plan.cols, plan.out_blend, plan.out_stride) == ([0, 2, 4], [0, 3, 6], (8, 8), (16, 24))
    got = V.decode(vae, z, tiling=DECODE_TILES)
    assert got.shape == expected.shape == (1, 3, 9, 40, 56)
    check("decode tiled", got, expected, truth)


def test_tiled_blend_reads_blended_tiles(models, tiled, monkeypatch):
    """A blend from the pristine tile grid (each neighbour as decoded) misses the reference at the tile corners."""
    vae = models[3]
    z, expected, truth = tiled

    def pristine_blend(grid, plan):
        pristine = [[np.array(t, np.float32) for t in row] for row in grid]
        (bh, bw), (sh, sw) = plan.out_blend, plan.out_stride
        rows = []
        for i, row in enumerate(pristine):
            out_row = []
            for j, tile in enumerate(row):
                tile = tile.copy()
                if i > 0:
                    tiling_mod.blend_v(pristine[i - 1][j], tile, bh)
                if j > 0:
                    tiling_mod.blend_h(row[j - 1], tile, bw)
                out_row.append(tile[:, :, :sh, :sw])
            rows.append(np.concatenate(out_row, axis=3))
        return np.concatenate(rows, axis=2)[:, :, : plan.out_size[0], : plan.out_size[1]]

    monkeypatch.setattr(tiling_mod, "blend_tiles", pristine_blend)
    wrong = V.decode(vae, z, tiling=DECODE_TILES)
    print(f"pristine-grid blend: max abs vs fp64 {errors(wrong, truth)[0]:.3e}")
    assert errors(wrong, truth)[0] > 100 * errors(expected, truth)[0]


def test_tiling_defaults_are_enable_tiling(models):
    """``tiling=True`` is ``enable_tiling()``: the reference's tile sizes (half the config's sample size), overlap
    factors (1/6, 1/5) and the layout derived from them (the reference's output may exceed 8x the latents)."""
    ref, _, cfg, _ = models
    m = copy.deepcopy(ref)
    m.enable_tiling()
    opts = V.tiling_options(cfg, True)
    assert (opts.tile_sample_min_height, opts.tile_sample_min_width) == (m.tile_sample_min_height,
                                                                        m.tile_sample_min_width) == (16, 24)
    assert (opts.tile_overlap_factor_height, opts.tile_overlap_factor_width) == (m.tile_overlap_factor_height,
                                                                                m.tile_overlap_factor_width)
    plan = V.decode_plan(cfg, (4, 6), True)
    assert plan.tile == (m.tile_latent_min_height, m.tile_latent_min_width)
    assert plan.stride == (int(m.tile_latent_min_height * (1 - m.tile_overlap_factor_height)),
                           int(m.tile_latent_min_width * (1 - m.tile_overlap_factor_width)))
    assert plan.out_blend == (2, 4) and plan.out_stride == (14, 20) and plan.out_size == (50, 56)
    with torch.no_grad():
        assert tuple(m.decode(torch.zeros(1, 4, 1, 4, 6)).sample.shape[-2:]) == plan.out_size
    assert V.decode_plan(cfg, (4, 6), False).num_tiles == 1
    assert V.decode_plan(cfg, (2, 3), True).num_tiles == 1  # no larger than a tile: untiled, as the reference


def test_encode_matches_diffusers(models):
    """17 frames -> batches of 9 and 8 with the cache carried: 5 latent frames; mean and clamped logvar."""
    ref, ref64, _, vae = models
    x = _video((1, 3, 17, 16, 24))
    mean, logvar = V.encode(vae, x)
    (m32, lv32), (m64, lv64) = _run(ref, "encode", x), _run(ref64, "encode", x)
    assert mean.shape == logvar.shape == m32.shape == (1, 4, 5, 2, 3)
    check("encode mean", mean, m32, m64)
    check("encode logvar", logvar, lv32, lv64)


def test_encode_tiled_matches_diffusers(models):
    """Tiles of 24 x 32 pixels every 16 x 24 on 40 x 56 frames (3 x 3 tiles); 5 frames, one batch."""
    ref, ref64, cfg, vae = models
    x = _video((1, 3, 5, 40, 56), seed=7)
    plan = V.encode_plan(cfg, (40, 56), DECODE_TILES)
    assert (plan.rows, plan.cols, plan.out_blend) == ([0, 16, 32], [0, 24, 48], (1, 1))
    mean, logvar = V.encode(vae, x, tiling=DECODE_TILES)
    (m32, lv32), (m64, lv64) = _run(ref, "encode", x, DECODE_TILES), _run(ref64, "encode", x, DECODE_TILES)
    assert mean.shape == m32.shape == (1, 4, 2, 5, 7)
    check("encode tiled mean", mean, m32, m64)
    check("encode tiled logvar", logvar, lv32, lv64)


def test_cogvideox15_config_variant():
    """The 1.5 VAE (``invert_scale_latents``) is the same network: its config loads and decodes like the reference."""
    ref = _random_vae({**TINY, "invert_scale_latents": True})
    cfg = V.CogVideoXVAEConfig.from_config(dict(ref.config))
    assert cfg.invert_scale_latents and cfg.scaling_factor == 0.7
    vae = V.load_vae(cfg, {k: v.numpy() for k, v in ref.state_dict().items()}, with_encoder=False)
    z = _latents((1, 4, 2, 2, 2), seed=8)
    check("decode 1.5", V.decode(vae, z), _run(ref, "decode", z), _run(copy.deepcopy(ref).double(), "decode", z))
    with pytest.raises(ValueError, match="without its encoder"):
        V.encode(vae, _video((1, 3, 1, 32, 48)))


def test_checkpoint_problems_reported_at_once(models):
    ref = models[0]
    cfg = models[2]
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    del tensors["decoder.conv_in.conv.weight"]
    tensors["decoder.extra.weight"] = np.zeros(3, np.float32)
    tensors["encoder.norm_out.weight"] = np.zeros(7, np.float32)
    with pytest.raises(ConversionError) as info:
        V.load_vae(cfg, tensors)
    err = info.value
    assert err.missing == ["decoder/conv_in/kernel"] and err.unexpected == ["decoder.extra.weight"]
    assert len(err.mismatched) == 1 and "encoder.norm_out.weight" in err.mismatched[0]


def test_tiling_knobs_checked(models):
    cfg = models[2]
    opts = V.tiling_options(cfg, True)
    assert (opts.tile_sample_min_height, opts.tile_sample_min_width) == (16, 24)
    assert (opts.tile_overlap_factor_height, opts.tile_overlap_factor_width) == (1 / 6, 1 / 5)
    assert not V.tiling_options(cfg, None).enabled and not V.tiling_options(cfg, {"enabled": False}).enabled
    assert V.tiling_options(cfg, {"tile_sample_min_height": 64}).tile_sample_min_width == 24
    with pytest.raises(UserError, match="do not apply to CogVideoX"):
        V.tiling_options(cfg, {"tile_sample_stride_height": 8})
    with pytest.raises(UserError, match=r"tile_overlap_factor_width must be a number in \[0, 1\)"):
        V.tiling_options(cfg, {"tile_overlap_factor_width": 1.5})
    with pytest.raises(UserError, match="no stride"):
        V.tiling_options(cfg, {"tile_sample_min_height": 8, "tile_overlap_factor_height": 0.5})
    with pytest.raises(UserError, match="do not apply to CogVideoX"):
        V.check_tiling({"tile_sample_stride_width": 64})
    # the run config's generic check knows CogVideoX's knobs; an options object means what the mapping means
    as_options = TilingOptions.coerce(DECODE_TILES)
    as_options.check()
    assert V.tiling_options(cfg, as_options) == V.tiling_options(cfg, DECODE_TILES)
    with pytest.raises(ValueError, match=r"tile_overlap_factor_height must be a number in \[0, 1\)"):
        TilingOptions.coerce({"tile_overlap_factor_height": 1.0}).check()
