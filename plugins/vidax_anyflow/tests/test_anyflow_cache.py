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
    """Five chunks of one latent frame at full_chunk_limit 2: three of them leave the full-resolution cache, each
    computed against the cached keys of those before it (a fill that forgets them moves the latents by 2e-5)."""
    opts = {"chunk_partition": [1] * 5}
    kept = pipe(num_frames=17, guidance_scale=2.0, negative_prompt="blurry", options=opts)
    redo = pipe(num_frames=17, guidance_scale=2.0, negative_prompt="blurry", options={**opts, "use_kv_cache": False})
    rel = float(np.linalg.norm(kept.latents - redo.latents) / np.linalg.norm(redo.latents))
    print(f"kept cache vs recomputed prefix: latents rel {rel:.2e}")
    assert rel < 1e-5, rel


def test_cache_memory_is_bounded_by_the_window(pipe):
    """A 2-frame window: the cache's bytes and the device memory the run holds are the same for 4 and 8 chunks."""
    runs = {n: pipe(num_frames=(n - 1) * 4 + 1, options={"chunk_partition": [1] * n, "cache_window": 2})
            for n in (4, 8)}
    short, long = runs[4].metrics, runs[8].metrics
    assert short["kv_cache_bytes"] == long["kv_cache_bytes"] > 0
    assert long["num_windows"] == 8 and runs[8].frames.shape[1] == 29
    if short["device_run_peak_bytes"] is not None:
        assert long["device_run_peak_bytes"] <= short["device_run_peak_bytes"] * 1.05 + 2**16


def test_stream_hands_out_each_chunk_as_it_is_made(pipe):
    chunks = []
    stream = pipe.stream(num_frames=13, options={"chunk_partition": [1, 1, 1, 1]})
    for frames in stream:
        chunks.append(frames.shape[1])
    assert chunks == [1, 4, 4, 4] and stream.output.frames.shape[1] == 13


def test_a_kept_cache_continues_the_video_as_one_longer_run(pipe, tmp_path):
    """Two one-frame chunks kept, continued by eight frames (two more chunks) from the matching noise: the latents
    and frames of one four-chunk run."""
    noise = np.random.default_rng(4).standard_normal((1, 4, 4, SIZE // 8, SIZE // 8)).astype(np.float32)
    for name, part in (("long", noise), ("head", noise[:, :, :2]), ("tail", noise[:, :, 2:])):
        np.save(tmp_path / f"{name}.npy", part)
    long = pipe(num_frames=13, options={"chunk_partition": [1] * 4}, initial_noise=str(tmp_path / "long.npy"))
    head = pipe(num_frames=5, options={"chunk_partition": [1] * 2}, initial_noise=str(tmp_path / "head.npy"),
                keep_cache=True)
    tail = pipe.extend(head.session, num_frames=8, initial_noise=str(tmp_path / "tail.npy"))
    rel = float(np.linalg.norm(tail.latents - long.latents[:, :, 2:]) / np.linalg.norm(long.latents[:, :, 2:]))
    frel = float(np.linalg.norm(tail.frames - long.frames[:, 5:]) / np.linalg.norm(long.frames[:, 5:]))
    print(f"continuation vs one run: latents rel {rel:.2e}, frames rel {frel:.2e}")
    assert tail.frames.shape[1] == 8 and rel < 1e-5 and frel < 1e-5
    with pytest.raises(vidax_error()):
        pipe.extend(head.session, num_frames=4)  # consumed by the continuation (not kept again)


def vidax_error():
    from vidax_core.errors import UserError

    return UserError
