"""VAE decode and encode spread over 8 fake CPU devices equal the single-device run (Wan2.1 and Wan2.2 VAEs).

Runs tests/parallel_scripts/vae_mesh.py in a subprocess (fake devices must be configured before jax is imported).
Tiles (or batch entries) of one shape run as one program sharded over the devices, so spreading compiles no more
programs than one device does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "vae_mesh.py", timeout=1200)


@pytest.mark.parametrize("case,shape,units", [
    ("wan21_tiled_decode", [1, 5, 24, 56, 3], 3),  # 3 latent tiles
    ("wan21_batch_decode", [2, 5, 32, 32, 3], 2),  # untiled, 2 batch entries
    ("wan21_tiled_encode", [1, 4, 2, 3, 7], 3),  # 3 pixel tiles
    ("wan22_tiled_decode", [2, 5, 32, 80, 3], 4),  # 2 tiles x 2 batch entries
])
def test_spread_decode_equals_single_device(out, case, shape, units):
    r = out[case]
    print(case, r)
    assert r["shape"] == shape
    assert r["devices_used"] == units  # one device per unit, none idling on padding
    assert r["max_abs"] == 0.0  # each device computes exactly what one device does for that unit
    assert 0 < r["compiles_spread"] <= r["compiles_one"]  # one program per tile shape, not one per device
    if case != "wan21_batch_decode":  # tiling really on (units above); decode: one program for every tile and
        assert r["compiles_one"] == (4 if "encode" in case else 1)  # chunk; encode: 2 tile shapes x (first, later)
    if "max_abs_vs_batched" in r:  # the whole batch at once on one device: another batch size, fp32 noise only
        assert r["max_abs_vs_batched"] < 1e-5
