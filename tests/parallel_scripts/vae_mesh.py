"""VAE decode/encode spread over 8 fake CPU devices vs one device (run by tests/test_parallel_vae.py).

XLA_FLAGS=--xla_force_host_platform_device_count=8 must be set before jax is imported. Prints one JSON line:
per case the max abs difference against the single-device run and how many devices ran chunk programs.
"""

from __future__ import annotations

import json

import jax
import numpy as np
from flax import nnx

jax.config.update("jax_default_matmul_precision", "highest")

from vidax_core.vae import wan21  # noqa: E402
from vidax_core.vae.wan22 import WanVAE22  # noqa: E402

TINY21 = dict(base_dim=8, z_dim=4, dim_mult=(1, 2, 2, 2), num_res_blocks=1, temperal_downsample=(False, True, True),
              latents_mean=(0.1, -0.2, 0.3, 0.0), latents_std=(1.5, 0.7, 2.0, 1.1))
TINY22 = dict(TINY21, decoder_base_dim=12, is_residual=True, patch_size=2, in_channels=12, out_channels=12,
              scale_factor_spatial=16)


def random_vae(cls, cfg, seed: int):
    """Every parameter random (kernels ~ 1/sqrt(fan_in), gains near 1, non-zero biases)."""
    graphdef, state = nnx.split(cls(cfg))
    rng = np.random.default_rng(seed)

    def draw(path, a):
        name = str(path[-1])
        if "gamma" in name:
            return (1 + 0.1 * rng.standard_normal(a.shape)).astype(np.float32)
        if "bias" in name:
            return (0.1 * rng.standard_normal(a.shape)).astype(np.float32)
        fan_in = int(np.prod(a.shape[:-1]))
        return (rng.standard_normal(a.shape) / np.sqrt(fan_in)).astype(np.float32)

    return nnx.merge(graphdef, jax.tree_util.tree_map_with_path(draw, state))


USED: set = set()
COMPILES = [0]  # XLA backend compiles of chunk programs (the only programs big enough to matter here)


def _on_event(event: str, duration: float, **_) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_on_event)


def _spy(program):
    def run(graphdef, state, x, caches, *args, **kw):
        if not isinstance(x, jax.core.Tracer):  # the decode also traces it for its cache shapes
            USED.update(x.devices())
        return program(graphdef, state, x, caches, *args, **kw)

    return run


wan21._decode_unit = _spy(wan21._decode_unit)
wan21._encode_chunk = _spy(wan21._encode_chunk)


def compare(fn, vae, x, batched: bool = False, **kw) -> dict:
    """Spread over 8 devices vs one device running the same units (batch entries one at a time, as spread does)."""
    c0 = COMPILES[0]
    one = np.concatenate([fn(vae, x[i : i + 1], devices=[jax.devices()[0]], **kw) for i in range(len(x))])
    c1 = COMPILES[0]
    USED.clear()
    spread = fn(vae, x, devices=jax.devices(), **kw)
    c2 = COMPILES[0]
    r = {"max_abs": float(np.abs(np.asarray(spread, np.float64) - np.asarray(one, np.float64)).max()),
         "devices_used": len(USED), "shape": list(np.shape(spread)), "compiles_one": c1 - c0,
         "compiles_spread": c2 - c1}
    if batched:  # the whole batch at once on one device (another batch size per program)
        whole = fn(vae, x, devices=[jax.devices()[0]], **kw)
        r["max_abs_vs_batched"] = float(np.abs(np.asarray(spread, np.float64) - np.asarray(whole, np.float64)).max())
    return r


def main() -> None:
    assert len(jax.devices()) == 8, jax.devices()
    rng = np.random.default_rng(0)
    tiles = dict(tile_sample_min_height=32, tile_sample_min_width=32, tile_sample_stride_height=24,
                 tile_sample_stride_width=24)
    vae = random_vae(wan21.WanVAE, wan21.WanVAEConfig(**TINY21), 1)
    out = {
        # one row of 3 latent tiles (widths 4, 4, 1: two programs) over the 8 devices
        "wan21_tiled_decode": compare(wan21.decode_video, vae, rng.standard_normal((1, 4, 2, 3, 7)), tiling=tiles),
        # batch entries on their own devices, untiled
        "wan21_batch_decode": compare(wan21.decode_video, vae, rng.standard_normal((2, 4, 2, 4, 4)), batched=True),
        # one row of 3 pixel tiles (widths 32, 32, 8)
        "wan21_tiled_encode": compare(wan21.encode_latents, vae, rng.uniform(-1, 1, (1, 3, 5, 24, 56)), tiling=tiles),
    }
    vae22 = random_vae(WanVAE22, wan21.WanVAEConfig(**TINY22), 2)
    tiles22 = dict(tile_sample_min_height=64, tile_sample_min_width=64, tile_sample_stride_height=48,
                   tile_sample_stride_width=48)
    # 2 batch entries x latent cols 0,3 (widths 4, 2): 4 units, blended in patch pixels
    out["wan22_tiled_decode"] = compare(wan21.decode_video, vae22, rng.standard_normal((2, 4, 2, 2, 5)),
                                        tiling=tiles22)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
