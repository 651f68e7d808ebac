"""The causal run's KV cache (vidax_core.causal) on a tiny AnyFlow-FAR model: the kept cache (each chunk's keys
computed once, the recent chunks' recomputed against it) gives the latents of recomputing the whole prefix after
every chunk as the reference does; and its memory is fixed by the window, not by the video's length."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from vidax_anyflow.tiny import save_tiny_anyflow  # noqa: E402

SIZE = 32


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    import vidax

    ckpt = tmp_path_factory.mktemp("far") / "ckpt"
    save_tiny_anyflow(ckpt, "far", seed=11)
    loaded = vidax.load("anyflow-far-wan2.1-1.3b", f"model.checkpoint={ckpt}", "prompt=a red fox", "sampling.seed=3",
                        f"sampling.height={SIZE}", f"sampling.width={SIZE}", "sampling.num_steps=1",
                        "sampling.max_sequence_length=16", "model.dtype=float32")
    yield loaded
    loaded.close()


def test_kept_cache_equals_recomputed_prefix(pipe):
    """Five chunks of one latent frame at full_chunk_limit 2: three of them leave the full-resolution cache."""
    opts = {"chunk_partition": [1] * 5}
    kept = pipe(num_frames=17, guidance_scale=2.0, negative_prompt="blurry", options=opts)
    redo = pipe(num_frames=17, guidance_scale=2.0, negative_prompt="blurry", options={**opts, "use_kv_cache": False})
    rel = float(np.linalg.norm(kept.latents - redo.latents) / np.linalg.norm(redo.latents))
    print(f"kept cache vs recomputed prefix: latents rel {rel:.2e}")
    assert rel < 1e-5, rel


def test_cache_memory_is_bounded_by_the_window(pipe):
    """A 2-frame window: the cache's bytes and the device memory the run holds are the same for 6 and 12 chunks."""
    runs = {n: pipe(num_frames=(n - 1) * 4 + 1, options={"chunk_partition": [1] * n, "cache_window": 2})
            for n in (6, 12)}
    short, long = runs[6].metrics, runs[12].metrics
    assert short["kv_cache_bytes"] == long["kv_cache_bytes"] > 0
    assert long["num_windows"] == 12 and runs[12].frames.shape[1] == 45
    if short["device_run_peak_bytes"] is not None:
        assert long["device_run_peak_bytes"] <= short["device_run_peak_bytes"] * 1.05 + 2**16
