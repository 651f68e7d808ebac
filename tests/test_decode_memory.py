"""The VAE decode estimate against what XLA asked the lent TPU v5e for (the Wan2.1 VAE's chunk program, compiled
by benchmarks/vae_compile.py --compile-only; benchmarks/results/2026-12-07-tpu-v5e-b): under what the chip needed
by less than the 10% the run leaves XLA (memory_plan.MARGIN), at most 15% above it, on both sides of the program's
change of regime between 544x960 and 600x1024."""

from __future__ import annotations

import pytest

from vidax_core.vae.decode_memory import decode_bytes
from vidax_core.vae.tiling import TilingOptions

WAN21 = {"base_dim": 96, "z_dim": 16, "dim_mult": [1, 2, 4, 4]}  # the published vae/config.json's widths

MEASURED = [  # (height, width, frames, bytes of HLO temporaries on the v5e)
    (480, 832, 81, 3_725_525_504),
    (544, 960, 25, 5_159_782_400),
    (600, 1024, 81, int(16.09 * 2**30)),
    (720, 1152, 81, int(22.65 * 2**30)),
    (704, 1280, 81, int(25.06 * 2**30)),
    (720, 1280, 81, int(25.51 * 2**30)),
]


@pytest.mark.parametrize("h, w, f, asked", MEASURED, ids=[f"{h}x{w}" for h, w, _, _ in MEASURED])
def test_the_wan_decode_estimate_covers_what_the_v5e_asked(h, w, f, asked):
    est = decode_bytes(WAN21, f, h, w, frames_per_program=4)
    assert 0.92 * asked <= est <= 1.15 * asked, est / asked


def test_a_tile_of_a_large_frame_is_estimated_as_a_small_frame():
    tiles = TilingOptions(enabled=True)
    tiled = decode_bytes(WAN21, 81, 720, 1280, frames_per_program=4, tiling=tiles)
    assert tiled == decode_bytes(WAN21, 81, tiles.tile_sample_min_height, tiles.tile_sample_min_width, 4)
    assert tiled < decode_bytes(WAN21, 81, 720, 1280, frames_per_program=4) / 20


def test_the_tiles_held_on_the_host_cover_the_frame_by_the_overlap():
    from vidax_core.placement.memory_plan import tile_overlap

    assert tile_overlap(True, 720, 1280) == pytest.approx((256 / 192) ** 2)  # the reference's 256-px tiles, stride 192
    assert tile_overlap(True, 480, 256) == pytest.approx(256 / 192)  # one tile wide: no overlap across
    assert tile_overlap(True, 256, 256) == 1.0 and tile_overlap(False, 720, 1280) == 1.0
    knobs = {"tile_sample_min_height": 128, "tile_sample_min_width": 128, "tile_sample_stride_height": 96,
             "tile_sample_stride_width": 64}
    assert tile_overlap(knobs, 480, 848) == pytest.approx((128 / 96) * (128 / 64))


def test_a_tiled_dry_run_counts_the_tiles_on_the_host(capsys):
    from vidax_core.cli import main

    main(["run", "model.id=wan2.1-t2v-1.3b", "vae.tiling=true", "sampling.height=720", "sampling.width=1280",
          "--dry-run", "--device", "tpu-v5e"])
    out = capsys.readouterr().out
    video = 81 * 720 * 1280 * 3 * 4
    row = next(x for x in out.splitlines() if x.strip().startswith("decoded tiles"))
    assert f"host {video * (256 / 192) ** 2 / 2**30:.1f} GiB" in row, row


def test_where_the_reference_tiles_do_not_fit_the_run_takes_smaller_ones(capsys):
    """HunyuanVideo-1.5 decodes a tile's 121 frames at once: one of the reference's 256-pixel tiles needs ~22.7 GiB
    at 480p. Left to itself the run decodes in 128-pixel tiles (every knob the VAE needs) and says so; asked for the
    reference's tiles, the dry run says they do not fit and advises those knobs, which taken as written fit."""
    import yaml

    from vidax_core.cli import main
    from vidax_hunyuan.vae15 import HunyuanVAE15Config, decode_plan, tiling_options

    base = ["run", "model.id=hunyuanvideo-1.5-t2v-480p", "--dry-run", "--device", "tpu-v5e", "offload.enabled=true",
            "model.weight_dtype=float8_e4m3fn"]
    assert main(base) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(x for x in out if x.strip().startswith("vae decode "))
    assert "the run tiles it in 128-pixel tiles" in row and "device 5.7 GiB" in row, row
    assert next(x for x in out if "peak per device" in x).endswith(": fits")
    assert main([*base, "vae.tiling=true"]) == 0
    peak = next(x for x in capsys.readouterr().out.splitlines() if "peak per device" in x)
    assert "does not fit" in peak and "smaller tiles: vae.tiling=" in peak, peak
    knobs = yaml.safe_load(peak.split("smaller tiles: vae.tiling=")[1])
    plan = decode_plan(HunyuanVAE15Config(), (30, 53), tiling_options(knobs))  # 480x848's latent: tiles edge to edge
    assert plan.tile == (8, 8) and plan.num_tiles == 45
    assert main([*base, f"vae.tiling={knobs}"]) == 0
    assert next(x for x in capsys.readouterr().out.splitlines() if "peak per device" in x).endswith(": fits")


def test_the_smaller_tiles_advice_of_a_stride_tiled_vae_is_a_valid_tiling():
    """A stride-tiled VAE (Wan, LTX, HunyuanVideo) needs a stride below the 128-pixel tile (its 192 default would
    leave gaps, which the knobs' check refuses)."""
    import yaml

    from vidax_core.placement.memory_plan import smaller_tiles

    class Ckpt:
        def has(self, name):
            return True

        def config(self, name):
            return {"_class_name": "AutoencoderKLWan", **WAN21}

    knobs = yaml.safe_load(smaller_tiles(Ckpt()).split("vae.tiling=")[1])
    TilingOptions.coerce(knobs).check()
    assert knobs["tile_sample_stride_height"] < knobs["tile_sample_min_height"] == 128
