"""End to end: tiny diffusers ``Kandinsky6SRPipeline`` and the real ``vidax run`` CLI on the same clip and noise.

diffusers (PyTorch, fp32) is the reference, its NABLA BlockMask applied as the compiled flex kernel applies it
(:func:`vidax_core.testing.reference.block_masked_flex`). Both see the same low-resolution clip (vidax reads it
as a ``.npy`` of float frames) and the same per-call noise draws: the pipeline's ``randn_tensor`` hands out
``noise_0``, ``noise_1``, ... of the .npz vidax takes as ``sampling.initial_noise``. The command line runs
in-process here (the SR stage case of test_k6_e2e.py runs it as a separate ``vidax`` process).
Compared: every tile's final
latents (what the pipeline hands its decoder; vidax's ``output.save_latents``) within 1e-4, the blended frames
within 5e-3 relative L2. Cases: x2.25 with the latent upscaler and flow Euler (the 1.125 pre-upscale, a 2 x 2
tile grid, two tiles per DiT call); x4 through bilinear pixel tiles and the K-VAE encoder (a checkpoint without
an upscaler) with the PiFlow-distilled DiT.

The inputs matter: the reference with its noise mixed at another ``lq_noise_scale`` lands far past the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, rel_l2  # noqa: E402
from vidax_core.testing.reference import block_masked_flex  # noqa: E402
from vidax_kandinsky.k6sr_tiny import save_tiny_sr  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_sr")

FRAME_BOUND = 5e-3
FRAMES = 9


def clip(height: int, width: int, seed: int = 3) -> np.ndarray:
    """A smooth random clip (1, T, H, W, 3) in [0, 1]."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 1, (1, FRAMES, height // 4 + 1, width // 4 + 1, 3))
    return np.clip(np.repeat(np.repeat(coarse, 4, 2), 4, 3)[:, :, :height, :width]
                   + rng.normal(0, 0.05, (1, FRAMES, height, width, 3)), 0, 1).astype(np.float32)


def reference(pipe, video: np.ndarray, draws: list[np.ndarray], **call):
    """The pipeline's tile latents (what ``decode_latents`` receives, joined over the calls) and its frames."""
    import diffusers.pipelines.kandinsky6.pipeline_kandinsky6_sr as sr
    from diffusers.models.transformers import transformer_kandinsky6_sr as tk

    given, seen = iter(draws), []
    decode = pipe.decode_latents

    def randn(shape, **kw):
        a = next(given)
        assert tuple(a.shape) == tuple(shape), (a.shape, shape)
        return torch.from_numpy(a)

    def capture(latents):
        seen.append(latents.numpy().copy())
        return decode(latents)

    saved = sr.randn_tensor
    sr.randn_tensor, pipe.decode_latents = randn, capture
    try:
        with block_masked_flex(tk), torch.no_grad():
            frames = pipe(video=video, output_type="np", **call).frames
    finally:
        sr.randn_tensor = saved
        del pipe.decode_latents
    return np.concatenate(seen, axis=0), np.asarray(frames, np.float32)


def draws_for(shapes, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def check(tmp_path, model_id, ckpt, pipe, video, shapes, *, steps, options):
    np.save(tmp_path / "clip.npy", video)
    draws = draws_for(shapes)
    call = dict(resolution_scale=options["resolution_scale"], num_inference_steps=steps,
                tiles_batch_size=options.get("tiles_batch_size", 1))
    ref_latents, ref_frames = reference(pipe, video, draws, **call)
    _, t, h, w, _ = video.shape
    args = run_args(model_id, ckpt, "unused", sampling=dict(num_steps=steps, height=h, width=w, num_frames=t),
                    options=options) + [f"video={tmp_path / 'clip.npy'}"]
    run = run_e2e(tmp_path, *args, noise={f"noise_{k}": d for k, d in enumerate(draws)}, in_process=True)
    assert run.latents.shape == ref_latents.shape and run.frames.shape == ref_frames.shape
    rel, frel = rel_l2(run.latents, ref_latents), rel_l2(run.frames, ref_frames)
    print(f"[{model_id}] tile latents rel {rel:.3e}, frames rel {frel:.3e}, frames {run.frames.shape}")
    assert rel <= RUN_BOUND and frel <= FRAME_BOUND
    return pipe, video, draws, call, ref_latents


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    ckpt, pipe = save_tiny_sr(tmp_path_factory.mktemp("k6sr") / "ckpt", seed=1)
    pipe.set_progress_bar_config(disable=True)
    return ckpt, pipe


@pytest.fixture(scope="module")
def distill(tmp_path_factory):
    ckpt, pipe = save_tiny_sr(tmp_path_factory.mktemp("k6sr_distill") / "ckpt", seed=2, distill=True,
                              upscaler=False)
    pipe.set_progress_bar_config(disable=True)
    return ckpt, pipe


def test_sr_x225_upscaler_cli_matches_diffusers(tmp_path, base):
    """24 x 40 -> 1.125x pre-upscale to 28 x 44 -> 2 x 2 tiles of 16 x 32 (trained 32 x 64) -> 56 x 88."""
    ckpt, pipe = base
    shapes = [(2, 3, 8, 16, 4), (2, 3, 8, 16, 4)]
    pipe, video, draws, call, ref = check(
        tmp_path, "kandinsky6-vsr", ckpt, pipe, clip(24, 40), shapes, steps=2,
        options=dict(resolution_scale=2.25, tiles_batch_size=2))
    # the noise mix is exercised: another lq_noise_scale lands far off
    wrong, _ = reference(pipe, video, draws, lq_noise_scale=0.5, **call)
    print(f"[k6 sr, lq_noise_scale 0.5] tile latents rel {rel_l2(wrong, ref):.3e}")
    assert rel_l2(wrong, ref) > 20 * RUN_BOUND


def test_sr_x4_pixel_tiles_distilled_cli_matches_diffusers(tmp_path, distill):
    """12 x 16 -> 2 x 3 tiles of 8 x 8 (trained 32 x 32) at x4 through pixel tiles -> 48 x 64, PiFlow."""
    ckpt, pipe = distill
    check(tmp_path, "kandinsky6-vsr-distill", ckpt, pipe, clip(12, 16), [(1, 3, 8, 8, 4)] * 6, steps=2,
          options=dict(resolution_scale=4.0))

