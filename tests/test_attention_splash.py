"""The ``splash`` attention backend in Pallas' interpreter on CPU, against float64 numpy definitions: dense calls
under key lengths, causal, segment and mixture-of-transformers masks (head_dim 64 unpadded, a padded one, the loop
over query ranges when the tile tables exceed the scalar-memory budget), NABLA's block masks (the short grid and its
fallback), 3-D neighbourhoods on a brick layout; the tile tables themselves; the measured block table; and the FLOP
count of sparse attention (the work computed, the dense equivalent beside it)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core import attention as att
from vidax_core.attention import sparsity, splash_blocks
from vidax_core.attention.kernels import splash_nabla, splash_neighborhood, splash_tpu
from vidax_core.attention.splash_blocks import Blocks

from test_attention_masks import _lengths_to_kw, fp32_noise, make_case, reference, rel_err
from test_attention_neighborhood import reference as nb_reference
from test_attention_nabla import attention_reference as nabla_reference

pytestmark = pytest.mark.skipif(splash_tpu.import_error() is not None, reason=str(splash_tpu.import_error()))
B128 = Blocks(128, 128, 128)


class _splash_dispatch:
    """Route att.attention to splash for a CPU host (set_backend refuses it here), its kernels interpreted."""

    def __enter__(self):
        from jax.experimental.pallas import tpu as pltpu

        self._saved = (att._requested, att._resolved, dict(att._calls))
        att._requested = att._resolved = "splash"
        att._calls.clear()
        self._interpret = pltpu.force_tpu_interpret_mode()
        self._interpret.__enter__()

    def __exit__(self, *exc):
        self._interpret.__exit__(*exc)
        att._requested, att._resolved, calls = self._saved
        att._calls.clear()
        att._calls.update(calls)


@pytest.mark.parametrize("case, d, budget", [("causal_segments", 64, None), ("mot_padded", 8, None),
                                             ("lengths", 64, 8)])
def test_dense_matches_reference(case, d, budget, monkeypatch):
    """S=150 pads to two 128-row tiles (the causal diagonal crosses a tile edge; padded keys masked by the mask
    function); head_dim 64 runs unpadded, 8 is padded to 128; budget 8 bytes: one query tile per kernel call."""
    if budget is not None:
        monkeypatch.setattr(splash_tpu, "SMEM_BUDGET", budget)
    q, k, v, kw, vis = make_case(case, seed=2, b=2, s=150, h=2, d=d, s_txt=70)
    out = splash_tpu.attention(q, k, v, blocks=B128, interpret=True, **_lengths_to_kw(kw, k.shape[1]))
    assert rel_err(out, reference(q, k, v, vis)) < 10 * fp32_noise(q, k, v, vis)


def test_dispatch_records_the_tiles_and_a_dropped_mask_fails():
    q, k, v, kw, vis = make_case("causal_mask", seed=4, b=2, s=150, h=1, d=64)
    with _splash_dispatch():
        out = att.attention(q, k, v, **kw)
        calls = att.calls()
        wrong = att.attention(q, k, v, causal=True)  # the key mask dropped: the reference must notice
    assert rel_err(out, reference(q, k, v, vis)) < 10 * fp32_noise(q, k, v, vis)
    assert rel_err(wrong, reference(q, k, v, vis)) > 0.05
    (site,) = calls.values()
    assert site["backend"] == "splash" and site["tiles"] == "256x256/256"  # shrunk to the 150-token sequence


@pytest.mark.parametrize("d", [64, 128, 256, 512, 1024])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_tiles_fit_the_kernels_vector_memory(d, dtype):
    """A VAE's mid-block attention (one head of 512-1024 float32 channels) at the default 512x1024 tiles needs more
    than the 16 MiB a kernel gets (the v5e compiler refused one so); the tiles shrink until a step fits the budget,
    while a DiT's head dims keep the table's tiles."""
    t = splash_tpu.tiles_for("dense", 40_000, 40_000, d, dtype)
    t.check()
    assert splash_tpu.vmem_bytes(t.block_q, t.block_kv, t.block_kv_compute, d, jnp.dtype(dtype).itemsize) \
        <= splash_tpu.VMEM_BUDGET
    if d <= 128:
        assert str(t) == "512x1024/512"
    assert splash_tpu.vmem_bytes(512, 1024, 512, 1024, 4) > 16 * 2**20


def test_wide_single_head_matches_reference():
    """The shrunk tiles of a 1024-wide float32 head (the VAE's) give the same attention, a partial key tile
    included."""
    q, k, v, kw, vis = make_case("causal_mask", seed=5, b=2, s=300, h=1, d=1024)
    t = splash_tpu.tiles_for("dense", 300, 300, 1024, jnp.float32, Blocks(512, 1024, 512))
    assert str(t) == "384x128/128"  # the 300-token sequence's one 384-row tile, the key tiles shrunk to fit
    out = splash_tpu.attention(q, k, v, blocks=Blocks(512, 1024, 512), interpret=True,
                               **_lengths_to_kw(kw, k.shape[1]))
    assert rel_err(out, reference(q, k, v, vis)) < 10 * fp32_noise(q, k, v, vis)


def test_dense_tile_state_and_compaction():
    """Tile states from the definitions (a tile is skipped when no pair is visible, full when every pair is), and
    the compacted rows: non-empty tiles first in key order, empty steps repeating the row's last tile."""
    sq, sk, bq, bkv = 384, 300, 128, 128
    state = splash_tpu.dense_tile_state(384, sk, 384, bq, bkv, causal=True)[0]
    qi, kj = np.arange(sq)[:, None], np.arange(384)[None, :]
    vis = (kj < sk) & (kj <= qi)
    tiles = vis.reshape(3, bq, 3, bkv).transpose(0, 2, 1, 3)
    assert (state == np.where(tiles.all((2, 3)), 2, np.where(tiles.any((2, 3)), 1, 0))).all()
    m = splash_tpu.compact(np.array([[[0, 2, 0, 1], [0, 0, 0, 0], [1, 0, 2, 0]]]))
    assert m.data_next.tolist() == [[[1, 3], [0, 0], [0, 2]]] and m.block_mask.tolist() == [[[2, 1], [0, 0], [1, 2]]]
    kept = splash_tpu.compact(np.array([[[1, 1, 0]]]), np.array([[[4, 5, 6]]]), keys=np.array([[[3, 7, 9]]]))
    assert kept.data_next.tolist() == [[[3, 7]]] and kept.mask_next.tolist() == [[[4, 5]]]


def _sparse_mask(rng, b, h, n, per_row):
    m = np.zeros((b, h, n, n), bool)
    for idx in np.ndindex(b, h, n):
        m[idx][rng.choice(n, per_row, replace=False)] = True
    return m


def test_nabla_tiles_match_reference():
    """Exact attention over the kept (query block, key block) pairs of 64 tokens: a mask whose longest row keeps
    2 of the 8 key tiles runs the short grid (2 steps: cap 0.25), one whose longest keeps 3 its fallback; the
    measured density is the tiles run over the dense pairs."""
    rng = np.random.default_rng(0)
    b, h, n, g = 1, 2, 16, 64
    q, k, v = (rng.standard_normal((b, n * g, h, 64)).astype(np.float32) for _ in range(3))
    sparse = _sparse_mask(rng, b, h, n, 1)
    sparse[0, 1, 3, [0, 2]] = True  # two key tiles (of 2 blocks each): exactly the short grid
    dense_row = sparse.copy()
    dense_row[0, 1, 3, 4] = True  # a third: one more than the short grid holds
    seen = []
    fn = jax.jit(lambda q, k, v, m: splash_nabla.attention(
        q, k, v, m, g, blocks=Blocks(64, 128, 128), cap=0.25, interpret=True,
        on_density=lambda c, d: jax.debug.callback(lambda c: seen.append(float(c) / d), c)))
    for mask in (sparse, dense_row):
        got = np.asarray(fn(q, k, v, mask))
        np.testing.assert_allclose(got, nabla_reference(q, k, v, mask), atol=2e-6, rtol=0)
    jax.effects_barrier()
    tiles = [np.any(m.reshape(b, h, n, n // 2, 2), -1).sum() for m in (sparse, dense_row)]
    assert seen == pytest.approx([t * 64 * 128 / (b * h * (n * g) ** 2) for t in tiles])
    assert splash_nabla.tile_shape(Blocks(256, 128, 128), g) == (4, 2)
    with pytest.raises(ValueError, match="whole 64-token mask blocks, at most"):
        splash_nabla.tile_shape(Blocks(512, 512, 512), g)


def test_neighborhood_bricks_match_reference():
    """Odd grid and kernel sizes, windows shifted inward at the borders, bricks that do not divide the grid; the
    dispatcher records the splash kernel, its brick and its density."""
    grid, kernel = (5, 7, 9), (3, 3, 5)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, *grid, 2 * 64)).astype(np.float32) for _ in range(3))
    with _splash_dispatch():
        from vidax_core.attention.neighborhood import neighborhood_attention

        out = neighborhood_attention(q, k, v, kernel, heads=2, scale=0.5)
        calls = att.calls()
    np.testing.assert_allclose(np.asarray(out), nb_reference(q, k, v, kernel, 2, scale=0.5), atol=1e-5, rtol=0)
    (site,) = calls.values()
    brick = splash_neighborhood.choose_brick(grid, kernel, 512)
    assert site["backend"] == "neighborhood (splash)" and site["tiles"] == "brick " + "x".join(map(str, brick))
    tiles = splash_neighborhood.brick_tiles(grid, kernel, brick)
    assert site["sparse"] == "neighborhood" and site["density"] == pytest.approx(tiles * np.prod(brick)**2 / 315**2)
    # the tile tables agree with the windows: every visible pair lies in a tile that runs
    mask, used, axis_patterns, n_tiles = splash_neighborhood.tile_tables(grid, kernel, brick)
    assert n_tiles == tiles and int((mask.block_mask > 0).sum()) == tiles


def test_block_table_lookup(tmp_path, monkeypatch):
    table = {"defaults": {"dense": {"block_q": 256, "block_kv": 512, "block_kv_compute": 256}},
             "entries": [{"chip": "TPU v5 lite", "kind": "dense", "q_len": 32760, "kv_len": 32760, "head_dim": 128,
                          "dtype": "bfloat16", "block_q": 1024, "block_kv": 512},
                         {"chip": "TPU v5 lite", "kind": "dense", "q_len": 4096, "kv_len": 4096, "head_dim": 128,
                          "dtype": "bfloat16", "block_q": 512, "block_kv": 512},
                         {"chip": "TPU v5 lite", "kind": "dense", "q_len": 4096, "kv_len": 4096, "head_dim": 64,
                          "dtype": "bfloat16", "block_q": 256, "block_kv": 1024, "block_kv_compute": 512}]}
    look = lambda *a, **k: splash_blocks.lookup(*a, device_kind=k.pop("chip", "TPU v5 lite"), table=table)  # noqa
    assert look("dense", 75600, 75600, 128, jnp.bfloat16) == (Blocks(1024, 512, 512), "table")
    assert look("dense", 5000, 5000, 128, jnp.bfloat16)[0] == Blocks(512, 512, 512)
    assert look("dense", 17550, 17550, 64, "bfloat16")[0] == Blocks(256, 1024, 512)
    assert look("dense", 17550, 17550, 72, "bfloat16")[0] == Blocks(256, 1024, 512)  # nearest head_dim
    assert look("dense", 8, 8, 128, "float32", chip="TPU v6 lite") == (Blocks(256, 512, 256), "default")
    assert look("nabla", 8, 8, 128, "float32") == (Blocks(*splash_blocks.FALLBACK["nabla"]), "built-in")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entries": [{**table["entries"][0], "block_kv": 100}]}))
    with pytest.raises(ValueError, match="block_kv_compute must be a multiple of 128"):
        splash_blocks.load(str(bad))
    monkeypatch.setenv(splash_blocks.ENV, str(tmp_path / "t.json"))
    (tmp_path / "t.json").write_text(json.dumps(table))
    splash_blocks.load.cache_clear()
    try:
        assert splash_blocks.lookup("dense", 9, 9, 64, "x", device_kind="?")[0] == Blocks(256, 512, 256)
        assert splash_blocks.load()["entries"] == table["entries"]
        monkeypatch.delenv(splash_blocks.ENV)
        splash_blocks.load.cache_clear()
        assert splash_blocks.load()["entries"] == json.loads(splash_blocks.SHIPPED.read_text())["entries"]
    finally:
        splash_blocks.load.cache_clear()


def test_sparse_flops_count_the_work_computed():
    from vidax_core.report import throughput
    from vidax_kandinsky.dit import KandinskyDiTConfig
    from vidax_kandinsky.flops import dit_flops

    calls = {"a": {"sparse": "nabla", "density": 0.2, "dense_pairs": 3.0},
             "b": {"sparse": "nabla", "density": 0.6, "dense_pairs": 1.0}, "c": {"backend": "splash"}}
    assert sparsity.densities(calls) == {"nabla": pytest.approx(0.3)}
    cfg = KandinskyDiTConfig(attention_type="nabla")
    grid, text = (4, 16, 16), 32
    dense = dit_flops(cfg, 2, grid, text)
    computed = dit_flops(cfg, 2, grid, text, sparse={"nabla": 0.3})
    s = (4 // cfg.patch_size[0]) * (16 // cfg.patch_size[1]) * (16 // cfg.patch_size[2])
    attn = 2.0 * 2 * cfg.heads * s * s * 2 * cfg.head_dim * cfg.num_visual_blocks
    assert dense - computed == pytest.approx(0.7 * attn)
    full = KandinskyDiTConfig(attention_type="regular")
    assert dit_flops(full, 2, grid, text, sparse={"nabla": 0.3}) == dense  # dense attention ignores it
    u = throughput.utilisation(computed, 2.0, 1, "bfloat16", throughput.named("tpu-v5e"), dense, {"nabla": 0.3})
    assert u["sparse_speedup"] == pytest.approx(dense / computed)
    assert u["dense_equivalent_mfu"] == pytest.approx(dense / 2.0 / 197e12)
