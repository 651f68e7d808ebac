"""End to end: a tiny diffusers HelisPipeline and the real `vidax run` CLI from the same draws: three chunks (the
history filling up, the first frame kept), the pipeline's every chunk noise recorded while it ran and replayed by
vidax from the `.npz`; UniPC and Euler HeliosSchedulers."""

from __future__ import annotations

import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import save_pipeline
from vidax_helios.tiny import build_tiny_helios

pytest.importorskip("torch")

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
H, W, STEPS = 48, 32, 3
OPTIONS = dict(history_sizes=[4, 2, 1], num_latent_frames_per_chunk=3)
CASES = {"unipc": {}, "euler": dict(scheduler_type="euler")}


@pytest.mark.parametrize("case", list(CASES))
def test_chunks_match_diffusers(tmp_path, case):
    from diffusers.pipelines.helios import pipeline_helios as module

    from vidax_core.testing.draws import reference_windowed_outputs
    from vidax_core.bench.torch_reference import identity_ftfy

    identity_ftfy(module)
    pipe = build_tiny_helios(seed=5, scheduler=CASES[case])
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    frames = 27  # chunks of 9 video frames (3 latent frames): three chunks
    ref_latents, ref_frames, draws = reference_windowed_outputs(
        pipe, module, prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=frames,
        num_inference_steps=STEPS, guidance_scale=5.0, max_sequence_length=16, **OPTIONS)
    assert len(draws) == 3
    sampling = dict(num_steps=STEPS, height=H, width=W, num_frames=frames, guidance_scale=5.0, max_sequence_length=16,
                    scheduler=None)
    run = run_e2e(tmp_path, *run_args("helios-base", ckpt, PROMPT, NEGATIVE, sampling=sampling, options=OPTIONS),
                  noise=draws)
    assert_run_matches(case, run.latents, run.frames, ref_latents, ref_frames, latent_shape=(1, 4, 9, H // 8, W // 8),
                       frame_shape=(1, 25, H, W, 3))
    assert run.metrics["num_windows"] == 3


# HeliosPyramidPipeline: Helios-Mid (UniPC stages, CFG-Zero* with its zero-init) and Helios-Distilled (DMD stages,
# the first chunk amplified, one pass); each chunk in three stages of 16x16, 32x32 and 64x64 pixels' latents
PYRAMID = {"helios-mid": dict(steps=[3, 2, 2], guidance=5.0, amplify=False),
           "helios-distilled": dict(steps=[2, 1, 2], guidance=1.0, amplify=True)}


@pytest.mark.parametrize("model_id", list(PYRAMID))
def test_pyramid_chunks_match_diffusers(tmp_path, model_id):
    import torch
    from diffusers import HeliosPyramidPipeline
    from diffusers.pipelines.helios import pipeline_helios_pyramid as module

    from vidax_core.bench.torch_reference import identity_ftfy
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.draws import reference_windowed_outputs

    identity_ftfy(module)
    plugins = get_plugins()
    ckpt = plugins.call("builtin_checkpoint", plugins.registry.get(model_id), name="tiny-random")
    pipe = HeliosPyramidPipeline.from_pretrained(ckpt, torch_dtype=torch.float32)
    forward = pipe.transformer.forward

    def contiguous(*args, **kwargs):  # diffusers 0.42.1's CFG-Zero* calls .view() on the DiT's permuted output,
        out = forward(*args, **kwargs)  # which fails; the same values, contiguous
        return (out[0].contiguous(), *out[1:])

    pipe.transformer.forward = contiguous
    case = PYRAMID[model_id]
    h = w = 64
    frames = 18  # two chunks of 9 video frames
    ref_latents, ref_frames, draws = reference_windowed_outputs(
        pipe, module, prompt=PROMPT, negative_prompt=NEGATIVE, height=h, width=w, num_frames=frames,
        pyramid_num_inference_steps_list=case["steps"], guidance_scale=case["guidance"],
        is_amplify_first_chunk=case["amplify"], max_sequence_length=16, **OPTIONS)
    assert len(draws) == 2 * 3  # per chunk: its noise, then the block noise of stages 2 and 3
    sampling = dict(num_steps=sum(case["steps"]), height=h, width=w, num_frames=frames,
                    guidance_scale=case["guidance"], max_sequence_length=16, scheduler=None)
    options = dict(OPTIONS, pyramid_num_inference_steps_list=case["steps"], is_amplify_first_chunk=case["amplify"])
    run = run_e2e(tmp_path, *run_args(model_id, ckpt, PROMPT, NEGATIVE, sampling=sampling, options=options),
                  noise=draws)
    assert_run_matches(model_id, run.latents, run.frames, ref_latents, ref_frames,
                       latent_shape=(1, 4, 6, h // 8, w // 8), frame_shape=(1, 17, h, w, 3))
    assert run.metrics["num_windows"] == 6
