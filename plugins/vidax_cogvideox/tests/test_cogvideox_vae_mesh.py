"""The CogVideoX VAE's tiled decode spread over 4 fake CPU devices equals the one-device run, unit for unit.

Fake devices must be configured before jax is imported, so the check runs this file as a script in a subprocess;
it prints one JSON line that the test reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from vidax_core.testing.devices import xla_flags

pytestmark = pytest.mark.xdist_group("cogvideox_vae")

DEVICES = 4


def _random_vae(seed: int = 0):
    import jax
    import numpy as np
    from flax import nnx

    from vidax_cogvideox import vae as V

    cfg = V.CogVideoXVAEConfig(block_out_channels=(8, 8, 16, 16), latent_channels=4, layers_per_block=1,
                               norm_num_groups=4, sample_height=32, sample_width=48)
    graphdef, state = nnx.split(V.CogVideoXVAE(cfg, with_encoder=False))
    rng = np.random.default_rng(seed)

    def draw(path, a):
        name = str(path[-1])
        if name == "scale":
            return (1 + 0.1 * rng.standard_normal(a.shape)).astype(np.float32)
        if name == "bias":
            return (0.1 * rng.standard_normal(a.shape)).astype(np.float32)
        return (rng.standard_normal(a.shape) / np.sqrt(np.prod(a.shape[:-1]))).astype(np.float32)

    return nnx.merge(graphdef, jax.tree_util.tree_map_with_path(draw, state))


def _main() -> None:
    import jax
    import numpy as np

    jax.config.update("jax_default_matmul_precision", "highest")
    from vidax_cogvideox import vae as V

    vae = _random_vae()
    tiles = dict(tile_sample_min_height=24, tile_sample_min_width=32, tile_overlap_factor_height=1 / 3,
                 tile_overlap_factor_width=1 / 4)
    z = np.random.default_rng(1).standard_normal((2, 4, 1, 3, 5)).astype(np.float32)  # 2 x 2 tiles per entry
    one = np.concatenate([V.decode(vae, z[i : i + 1], tiling=tiles, devices=jax.devices()[:1]) for i in range(2)])
    spread = V.decode(vae, z, tiling=tiles, devices=jax.devices())
    print(json.dumps({"devices": len(jax.devices()), "shape": list(spread.shape),
                      "max_abs": float(np.abs(spread.astype(np.float64) - one).max()),
                      "scale": float(np.abs(one).max())}))


def test_spread_tiled_decode_equals_one_device():
    env = dict(os.environ, XLA_FLAGS=xla_flags(DEVICES), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(r)
    assert r["devices"] == DEVICES and r["shape"] == [2, 3, 1, 24, 40]
    assert r["scale"] > 0.1 and r["max_abs"] == 0.0  # each device computes exactly what one device does


if __name__ == "__main__":
    _main()
