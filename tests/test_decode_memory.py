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
