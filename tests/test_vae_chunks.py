"""The core VAE loader and chunk runner (vidax_core.vae.loader, vidax_core.vae.chunks) on a tiny two-part model
whose outputs are exact in float32: what each chunk program receives (caches, ``first``, extra arguments), the
encoder left out of decode-only loads, and the posterior split, each against values worked out by hand."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule
from vidax_core.nn.layers import param
from vidax_core.vae.chunks import chunk_runner, gaussian_posterior
from vidax_core.vae.loader import load_vae
from vidax_core.vae.tiling import TilePlan, run_tiled


@dataclass(frozen=True)
class Cfg:
    dtype: object = jnp.float32


class Tiny(nnx.Module):
    """decoder: x * w (per channel); encoder: x + b."""

    def __init__(self, with_encoder: bool):
        self.cfg = Cfg()
        self.w = param(jnp.ones((2,), jnp.float32), (None,))
        self.b = param(jnp.zeros((2,), jnp.float32), (None,)) if with_encoder else None


RULES = [KeyRule(r"decoder\.w", "w"), KeyRule(r"encoder\.b", "b")]
DECODER_RULES = RULES[:1]
TENSORS = {"decoder.w": np.array([2.0, 3.0], np.float32), "encoder.b": np.array([1.0, -1.0], np.float32)}


def test_loader_builds_with_and_without_the_encoder():
    full = load_vae(Tiny, TENSORS, with_encoder=True, rules=RULES, decoder_rules=DECODER_RULES,
                    decode_only_ignore=[r"encoder\..*"])
    np.testing.assert_array_equal(np.asarray(full.b[...]), [1.0, -1.0])
    dec = load_vae(Tiny, TENSORS, with_encoder=False, rules=RULES, decoder_rules=DECODER_RULES,
                   decode_only_ignore=[r"encoder\..*"])
    assert dec.b is None and np.asarray(dec.w[...]).tolist() == [2.0, 3.0]
    with pytest.raises(UserError, match="encoder.b"):  # without the ignore list the encoder's key is unexpected
        load_vae(Tiny, TENSORS, with_encoder=False, rules=RULES, decoder_rules=DECODER_RULES)


def _streaming(graphdef, state, x, caches, scale, *, first):
    """y = x * w * scale + (frames seen so far); the cache counts frames."""
    vae = nnx.merge(graphdef, state)
    seen = jnp.zeros((), jnp.float32) if caches is None else caches
    y = x * vae.w[...] * scale + seen
    return y, seen + x.shape[1] + (100.0 if first else 0.0)


def test_streaming_runner_carries_the_cache_and_the_first_flag():
    vae = load_vae(Tiny, TENSORS, with_encoder=False, rules=RULES, decoder_rules=DECODER_RULES,
                   decode_only_ignore=[r"encoder\..*"])
    calls = []
    run = chunk_runner(vae, _streaming, extra=lambda n: (calls.append(n) or np.float32(10.0),))
    x = np.ones((1, 3, 2, 2, 2), np.float32)
    out = run_tiled(x, run, plan=TilePlan.whole((2, 2), (2, 2)), bounds=[(0, 1), (1, 3)])
    # first chunk: 1 * w * 10 + 0; second: w * 10 + (1 frame + 100 for the first chunk)
    np.testing.assert_array_equal(out[0, 0, 0, 0], [20.0, 30.0])
    np.testing.assert_array_equal(out[0, 1, 0, 0], [121.0, 131.0])
    assert calls == [1, 1]


def test_placed_runner_puts_weights_input_and_extras_on_the_device():
    vae = load_vae(Tiny, TENSORS, with_encoder=False, rules=RULES, decoder_rules=DECODER_RULES,
                   decode_only_ignore=[r"encoder\..*"])
    dev = jax.devices()[0]
    seen = []

    def program(graphdef, state, x, t):
        seen.append((x.dtype, t.dtype))
        return x * nnx.merge(graphdef, state).w[...] + t

    run = chunk_runner(vae, program, streams=False, extra=lambda n: (np.full((n, 1, 1, 1, 1), 0.5, np.float32),))
    y, caches = run(np.ones((2, 1, 1, 1, 2), np.float64), None, True, (dev, dev))
    assert caches is None and seen[0] == (jnp.float32, jnp.float32)
    np.testing.assert_array_equal(np.asarray(y)[:, 0, 0, 0], [[2.5, 3.5], [2.5, 3.5]])
    assert list(y.devices()) == [dev]


def test_gaussian_posterior_splits_clamps_and_broadcasts():
    moments = np.zeros((1, 1, 1, 1, 4), np.float32)
    moments[..., :2] = [1.0, 2.0]
    moments[..., 2:] = [-50.0, 25.0]
    mean, logvar = gaussian_posterior(moments, 2)
    assert mean.shape == logvar.shape == (1, 2, 1, 1, 1)
    assert mean.ravel().tolist() == [1.0, 2.0] and logvar.ravel().tolist() == [-30.0, 20.0]
    shared = np.concatenate([moments[..., :2], np.full((1, 1, 1, 1, 1), 3.0, np.float32)], axis=-1)
    _, lv = gaussian_posterior(shared, 2)  # one log-variance channel (LTX) broadcast to every latent channel
    assert lv.shape == (1, 2, 1, 1, 1) and lv.ravel().tolist() == [3.0, 3.0]


def test_a_tiled_run_reports_each_tile_as_it_finishes():
    """A decode of many tiles (HunyuanVideo-1.5's 128-pixel tiles ran for minutes on the v5e with no progress)
    reports (done, total) once per finished tile program, in order, only inside ``tile_progress``; an untiled
    decode (one tile, however many chunks) reports nothing."""
    from vidax_core.report.progress import tile_progress

    def double(x, caches, first, where, **_):
        return jnp.asarray(x) * 2, caches

    plan = TilePlan((4, 4), (2, 2), (2, 2), (2, 2), (0, 0), (4, 4))  # 2 x 2 tiles, no blend
    x = np.arange(2 * 3 * 4 * 4 * 1, dtype=np.float32).reshape(2, 3, 4, 4, 1)
    seen = []
    with tile_progress(lambda d, t: seen.append((d, t))):
        out = run_tiled(x, double, plan=plan, bounds=[(0, 1), (1, 3)])
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [(k, 8) for k in range(1, 9)]  # 4 tiles x 2 time chunks
    seen.clear()
    with tile_progress(lambda d, t: seen.append((d, t))):
        run_tiled(x, double, plan=TilePlan.whole((4, 4), (4, 4)), bounds=[(0, 1), (1, 3)])
    assert seen == []  # one tile in two time chunks: the decode's chunk bar says it, no tile bar
    run_tiled(x, double, plan=plan, bounds=[(0, 3)])  # no listener: nothing waits, nothing reported
    assert seen == []


def test_a_tiled_stream_runs_tile_by_tile_and_keeps_no_tile_caches_on_the_device():
    """Every tile's chunks run before the next tile starts (a 720p decode that kept its 28 tiles' caches on the v5e
    together ran out of memory), the output is the same as chunk by chunk, and the caches are dropped after the
    last piece or wait in host memory between pieces of a stream."""
    from vidax_core.vae.tiling import TiledStream

    calls = []

    def step(x, caches, first, where, **_):  # the cache counts the chunks a tile has run
        calls.append((float(np.asarray(x).ravel()[0]), bool(first)))
        count = jnp.zeros(()) if caches is None else caches[0]
        return jnp.asarray(x) * 2 + count, [count + 1]

    plan = TilePlan((4, 4), (2, 2), (2, 2), (2, 2), (0, 0), (4, 4))  # 2 x 2 tiles, no blend
    x = np.arange(2 * 3 * 4 * 4 * 1, dtype=np.float32).reshape(2, 3, 4, 4, 1) * 100
    out = run_tiled(x, step, plan=plan, bounds=[(0, 1), (1, 2), (2, 3)])
    np.testing.assert_array_equal(out, 2 * x + np.arange(3, dtype=np.float32)[None, :, None, None, None])
    starts = [v for v, _ in calls]
    tiles = [x[0, :, i:i + 2, j:j + 2].reshape(3, -1)[:, 0] for i in (0, 2) for j in (0, 2)]
    assert starts == [float(v) for t in tiles for v in t]  # tile-major: tile 0's three chunks first
    assert [f for _, f in calls] == [True, False, False] * 4
    stream = TiledStream(x.shape, step, plan=plan)
    first = stream.push(x[:, :2], [(0, 1), (1, 2)])
    assert all(isinstance(c[0], np.ndarray) for c in stream.caches)  # host copies between pieces
    rest = stream.push(x[:, 2:], [(0, 1)], last=True)
    np.testing.assert_array_equal(np.concatenate([first, rest], axis=1), out)
    assert stream.caches == [None] * 4
