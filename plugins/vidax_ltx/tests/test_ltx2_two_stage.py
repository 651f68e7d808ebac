"""The official LTX-2.x distilled recipe in two stages (``options.two_stage``) against the reference's calls on a tiny
random LTX-2.5 pipeline: ``LTX2Pipeline`` at half the size with the 8 distilled sigmas (``output_type="latent"``),
``LTX2LatentUpsamplePipeline(latents=...)`` with a tiny ``LTX2LatentUpsamplerModel``, then ``LTX2Pipeline`` at the
full size from the upsampled video and the first stage's audio with ``STAGE_2_DISTILLED_SIGMA_VALUES`` and
``noise_scale`` 0.909375. The second call's two draws are replayed from the ``.npz`` (``video_1``, ``audio_1``, the
packed tokens the pipeline's ``_create_noised_state`` draws). The same run decodes with the LTX-2.5 diffusion decoder
(``options.video_decoder=diffusion``): the reference's fourth call is ``LTX2VideoDiffusionDecodePipeline(latents,
denormalize=False)``, its canvas replayed from the ``.npz``'s ``decoder_0``; frames within 5e-3 (the issue's bound).
The LTX-2 upsampler alone (rational scales 2 and 1.5) against the reference module; an upsampler-less checkpoint and
an odd size are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, rel_l2  # noqa: E402
from vidax_ltx.ltx2_presets import DISTILLED_SIGMAS, STAGE_2_SIGMAS  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_two_stage")

ENTRY = ("ltx2", "vidax_ltx.ltx2_plugin:LTX2Plugin")
PROMPT = "a small red fox barks in the snow"
SIZE, FRAMES = 128, 9  # stage 1 at 64x64 (latents 2 x 2 x 2), stage 2 at 128x128 (2 x 4 x 4)
DISTILLED = dict(guidance_scale=1.0, stg_scale=0.0, modality_scale=1.0, guidance_rescale=0.0, audio_guidance_scale=1.0,
                 audio_stg_scale=None, audio_modality_scale=None, audio_guidance_rescale=None, frame_rate=24.0,
                 max_sequence_length=16, decode_timestep=0.0, decode_noise_scale=0.0)


def _reference(pipe, upsampler, noise, output_type="latent"):
    from diffusers import LTX2LatentUpsamplePipeline

    with torch.no_grad():
        first = pipe(prompt=PROMPT, height=SIZE // 2, width=SIZE // 2, num_frames=FRAMES, num_inference_steps=8,
                     sigmas=DISTILLED_SIGMAS, latents=torch.from_numpy(noise["video"]),
                     audio_latents=torch.from_numpy(noise["audio"]), output_type="latent", **DISTILLED)
        up = LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=upsampler)(
            latents=first.frames, output_type="latent").frames
        draws = iter([torch.from_numpy(noise["video_1"]), torch.from_numpy(noise["audio_1"])])
        pipe._create_noised_state = lambda latents, s, generator=None: s * next(draws) + (1 - s) * latents
        try:
            out = pipe(prompt=PROMPT, height=SIZE, width=SIZE, num_frames=FRAMES, num_inference_steps=3,
                       sigmas=STAGE_2_SIGMAS, noise_scale=STAGE_2_SIGMAS[0], latents=up, audio_latents=first.audio,
                       output_type=output_type, **DISTILLED)
        finally:
            del pipe._create_noised_state
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from vidax_core.testing.tiny.ltx2 import (build_tiny_diffusion_decoder, build_tiny_latent_upsampler,
                                              build_tiny_ltx2_pipeline, use_dense_neighborhood_attention)

    tmp = tmp_path_factory.mktemp("ltx2_two_stage")
    pipe, ckpt = build_tiny_ltx2_pipeline(tmp / "tiny", "ltx2.5", seed=3)
    upsampler = build_tiny_latent_upsampler(ckpt / "latent_upsampler", seed=4)
    decoder = build_tiny_diffusion_decoder(ckpt / "diffusion_decoder", seed=7)
    use_dense_neighborhood_attention(decoder)  # its flex mask densely under SDPA: the same attention, faster on CPU
    rng = np.random.default_rng(0)
    noise = {"video": rng.standard_normal((1, 8, 2, 2, 2)), "audio": rng.standard_normal((1, 4, 9, 4)),
             "video_1": rng.standard_normal((1, 2 * 4 * 4, 8)), "audio_1": rng.standard_normal((1, 9, 16)),
             "decoder_0": rng.standard_normal((1, 3, FRAMES, SIZE, SIZE))}
    noise = {k: v.astype(np.float32) for k, v in noise.items()}
    return dict(tmp=tmp, pipe=pipe, upsampler=upsampler, decoder=decoder, ckpt=ckpt, noise=noise,
                env=plugin_env(tmp / "entry", *ENTRY))


def test_cli_matches_the_reference_calls(tiny):
    import diffusers.models.autoencoders.ltx2_diffusion_decoder as reference_decoder
    from diffusers.pipelines.ltx2.pipeline_ltx2_diffusion_decode import LTX2VideoDiffusionDecodePipeline

    ref = _reference(tiny["pipe"], tiny["upsampler"], tiny["noise"])
    decode = LTX2VideoDiffusionDecodePipeline(diffusion_decoder=tiny["decoder"], scheduler=tiny["pipe"].scheduler)
    decode.set_progress_bar_config(disable=True)
    canvas = iter([torch.from_numpy(tiny["noise"]["decoder_0"])])
    draw = reference_decoder.randn_tensor
    reference_decoder.randn_tensor = lambda *a, **k: next(canvas)  # the decoder's one draw: decoder_0
    try:
        with torch.no_grad():
            frames = np.asarray(decode(ref.frames, output_type="np", denormalize=False).frames, np.float32)
    finally:
        reference_decoder.randn_tensor = draw
    args = run_args("ltx-2.5-22b-distilled", tiny["ckpt"], PROMPT,
                    sampling=dict(height=SIZE, width=SIZE, num_frames=FRAMES, max_sequence_length=16),
                    options=dict(two_stage=True, spatio_temporal_guidance_blocks=[1], video_decoder="diffusion"))
    run = run_e2e(tiny["tmp"] / "run", *args, noise=tiny["noise"], env=tiny["env"])
    errors = {"video": rel_l2(run.latents["video"], ref.frames.numpy()),
              "audio": rel_l2(run.latents["audio"], ref.audio.numpy()), "frames": rel_l2(run.frames, frames)}
    frames_abs = float(np.abs(run.frames - frames).max())
    print("two-stage distilled recipe + diffusion decoder, rel L2 " + ", ".join(f"{k} {v:.2e}" for k, v in
                                                                              errors.items())
          + f"; frames max abs {frames_abs:.2e}")
    assert run.latents["video"].shape == (1, 8, 2, 4, 4) and run.frames.shape == (1, FRAMES, SIZE, SIZE, 3)
    assert [(p["num_steps"], p["width"]) for p in run.metrics["passes"]] == [(8, SIZE // 2), (3, SIZE)]
    assert all(v <= RUN_BOUND for v in errors.values()), errors
    assert frames_abs < 5e-3
    assert {c["backend"] for c in run.metrics["attention_calls"].values()} >= {"neighborhood_blockwise"}


@pytest.mark.parametrize("scale", [2.0, 1.5])
def test_ltx2_upsampler_matches_reference(scale):
    from vidax_core.testing.tiny.ltx2 import build_tiny_latent_upsampler
    from vidax_ltx.upsampler import LTXUpsamplerConfig, load_upsampler, upsample

    ref = build_tiny_latent_upsampler(seed=5, rational_spatial_scale=scale)
    z = torch.randn((1, 8, 2, 4, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = ref(z).numpy()
    cfg = LTXUpsamplerConfig.from_config({**dict(ref.config), "_class_name": "LTX2LatentUpsamplerModel"})
    got = upsample(load_upsampler(cfg, {k: v.numpy() for k, v in ref.state_dict().items()}), z.numpy())
    print(f"LTX-2 latent upsampler x{scale}: rel L2 {rel_l2(got, want):.2e}")
    assert got.shape == want.shape and rel_l2(got, want) < 1e-5


def test_two_stage_refusals(tiny, tmp_path, capsys, monkeypatch):
    import shutil

    from vidax_core import cli

    monkeypatch.chdir(tmp_path)
    bare = tmp_path / "bare"
    shutil.copytree(tiny["ckpt"], bare, ignore=shutil.ignore_patterns("latent_upsampler"))
    base = ["run", "model.id=ltx-2.5-22b-distilled", "prompt=a fox", "sampling.num_frames=9", "options.two_stage=true",
            "options.spatio_temporal_guidance_blocks=[1]", "--dry-run", "--quiet"]
    cases = {"no upsampler": ([f"model.checkpoint={bare}", "sampling.height=128", "sampling.width=128"],
                              "options.two_stage needs the LTX-2 latent upsampler"),
             "odd size": ([f"model.checkpoint={tiny['ckpt']}", "sampling.height=96", "sampling.width=128"],
                          "must be multiples of 64, got 128x96: use 128x64")}
    for name, (extra, want) in cases.items():
        assert cli.main(base + extra) == 2, name
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and want in lines[0], (name, lines)


def test_published_upsampler_layout():
    """``LTX2LatentUpsamplerModel``'s defaults (1024 mid channels, the rational x2 resampler) built abstractly."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    from vidax_core.testing.reference import check_full_size
    from vidax_ltx.upsampler import UPSAMPLER_IGNORE, UPSAMPLER_RULES, LTXUpsampler, LTXUpsamplerConfig

    cfg = LTXUpsamplerConfig.from_config({"_class_name": "LTX2LatentUpsamplerModel", "mid_channels": 1024})
    size = check_full_size(LTX2LatentUpsamplerModel, UPSAMPLER_RULES, lambda: LTXUpsampler(cfg),
                           component="latent_upsampler", ignore=UPSAMPLER_IGNORE, label="LTX-2 latent upsampler")
    assert size.dropped == ("upsampler.blur_down.kernel",)
