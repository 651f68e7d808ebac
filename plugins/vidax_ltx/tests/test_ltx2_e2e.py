"""End to end: `vidax run` against diffusers' LTX2Pipeline (text-to-video with audio) on tiny random checkpoints the
pipeline saved with `save_pretrained`, from the same initial noise of both streams (an .npz holding what the
pipeline takes as `latents=` and `audio_latents=`).

One model per generation: LTX-2.5 (Gemma-4 unified, the per-token RMS feature extractor, gated attention,
cross-attention AdaLN, a timestep-conditioned video decoder, `use_cross_timestep`) and LTX-2.0 (Gemma-3, the masked
mean/range extractor, caption projections in the DiT, `use_cross_timestep: false`). The dev recipe's guidance runs
in full: CFG 3 (audio 7), rescale 0.7, STG at block 1, modality isolation 3 (four passes per step), dynamic shift
with terminal 0.1; the distilled id runs the 8 distilled sigmas with one pass (on the 2.5 model).
Video latents, audio latents, frames and waveform are compared at 1e-4 relative L2; the mp4
carries the audio track. Each plausible bug (guidance rescaled in velocity space instead of the clean-sample space,
no rescale, the audio stream at the video's CFG scale, a guidance pass left out) is shown to move the reference past
the bound on the same inputs. ``use_cross_timestep`` cannot show in text-to-video (both streams share one timestep,
so the other stream's sigma is the stream's own); image-to-video (LTX2ImageToVideoPipeline) gives the video tokens
per-token timesteps, and there the flipped flag lands past the bound. Its image path (H.264 at the default
``image_crf`` 18 as the reference's PyAV path, bilinear resize, VAE posterior mean, normalised with scale 1) is
checked on the held first frame of a run without given latents.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.io.audio import audio_stream_count
from vidax_core.testing.cli import plugin_env, run_args, run_e2e, vidax
from vidax_core.testing.parity import RUN_BOUND, rel_l2
from vidax_ltx.ltx2_presets import DISTILLED_SIGMAS

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

pytestmark = pytest.mark.xdist_group("ltx2_e2e")

PROMPT = "a small red fox barks in the snow"
NEGATIVE = "blurry, static, muffled"
SIZE, FRAMES, STEPS, FPS = 64, 9, 3, 24.0
AUDIO_FRAMES = 9  # round(9 / 24 s x 16000 / 160 / 4)
STG_BLOCKS = [1]
DECODE_T = 0.05
DISTILLED = dict(sigmas=DISTILLED_SIGMAS, num_inference_steps=len(DISTILLED_SIGMAS), guidance_scale=1.0,
                 stg_scale=0.0, modality_scale=1.0, guidance_rescale=0.0, audio_guidance_scale=1.0,
                 audio_stg_scale=None, audio_modality_scale=None, audio_guidance_rescale=None)
# case -> (generation, model id, use_cross_timestep, the pipeline call's recipe beyond its defaults)
CASES = {"ltx2.5-dev": ("ltx2.5", "ltx-2.5-22b-dev", True, {}),
         "ltx2.0-dev": ("ltx2.0", "ltx-2-19b-dev", False, {}),
         "ltx2.5-distilled": ("ltx2.5", "ltx-2.5-22b-distilled", True, DISTILLED)}
BRANCHES = {"ltx2.5-distilled": ["cond"]}
ENTRY = ("ltx2", "vidax_ltx.ltx2_plugin:LTX2Plugin")
DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs", "ltx2_demo.yaml")


def _noise():
    rng = np.random.default_rng(0)
    return {"video": rng.standard_normal((1, 8, 2, SIZE // 32, SIZE // 32)).astype(np.float32),
            "audio": rng.standard_normal((1, 4, AUDIO_FRAMES, 4)).astype(np.float32)}


def _vidax_args(model_id, ckpt, **options):
    return run_args(model_id, ckpt, PROMPT, NEGATIVE,
                    sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, max_sequence_length=16),
                    options=dict(spatio_temporal_guidance_blocks=STG_BLOCKS, decode_timestep=DECODE_T,
                                 decode_noise_scale=0.0, **options))


def _reference(pipe, noise, output_type, *, use_cross_timestep, **overrides):
    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
                  num_inference_steps=STEPS, frame_rate=FPS, max_sequence_length=16,
                  use_cross_timestep=use_cross_timestep, spatio_temporal_guidance_blocks=STG_BLOCKS,
                  decode_timestep=DECODE_T, decode_noise_scale=0.0)
    kwargs.update(overrides)
    with torch.no_grad():
        out = pipe(latents=torch.from_numpy(noise["video"]), audio_latents=torch.from_numpy(noise["audio"]),
                   output_type=output_type, **kwargs)
    return np.asarray(out.frames, np.float32), out.audio.float().numpy()


def _velocity_space(pipe):
    """The plausible bug of guiding (and rescaling) the velocities as other families do."""
    pipe.convert_velocity_to_x0 = lambda sample, v, i, scheduler=None: v
    pipe.convert_x0_to_velocity = lambda sample, x0, i, scheduler=None: x0


@pytest.mark.parametrize("case", list(CASES))
def test_cli_matches_ltx2_pipeline(tmp_path, case):
    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

    generation, model_id, cross, recipe = CASES[case]
    pipe, ckpt = build_tiny_ltx2_pipeline(tmp_path / "tiny", generation, seed=3)
    noise = _noise()
    ref = dict(zip(("video", "audio"), _reference(pipe, noise, "latent", use_cross_timestep=cross, **recipe)))
    ref_frames, ref_wave = _reference(pipe, noise, "np", use_cross_timestep=cross, **recipe)

    sampling = dict(height=SIZE, width=SIZE, num_frames=FRAMES, max_sequence_length=16)
    if not recipe:
        sampling["num_steps"] = STEPS
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, sampling=sampling,
                    options=dict(spatio_temporal_guidance_blocks=STG_BLOCKS, decode_timestep=DECODE_T,
                                 decode_noise_scale=0.0))
    run = run_e2e(tmp_path, *args, noise=noise, audio=True, env=plugin_env(tmp_path / "entry", *ENTRY))
    assert run.metrics["guidance_branches"] == BRANCHES.get(case, ["cond", "uncond", "perturbed", "isolated"])
    errors = {k: rel_l2(run.latents[k], ref[k]) for k in ("video", "audio")}
    errors["frames"] = rel_l2(run.frames, ref_frames)
    errors["waveform"] = rel_l2(np.moveaxis(run.audio, -1, 1), ref_wave)
    print(f"[{case}] rel L2 " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert run.latents["video"].shape == ref["video"].shape == noise["video"].shape
    assert run.latents["audio"].shape == ref["audio"].shape == noise["audio"].shape
    assert run.frames.shape == ref_frames.shape == (1, FRAMES, SIZE, SIZE, 3)
    assert all(v <= RUN_BOUND for v in errors.values()), errors
    assert audio_stream_count(str(tmp_path / "run.mp4")) == 1
    if recipe:
        return

    wrong = {"no rescale": dict(guidance_rescale=0.0, audio_guidance_rescale=None),
             "audio CFG at the video scale": dict(audio_guidance_scale=None),
             "no modality guidance": dict(modality_scale=1.0, audio_modality_scale=None),
             "no STG": dict(stg_scale=0.0, audio_stg_scale=None)}
    for label, kw in [*wrong.items(), ("velocity-space guidance", None)]:
        if kw is None:
            _velocity_space(pipe)
        bad = _reference(pipe, noise, "latent", use_cross_timestep=cross, **(kw or {}))
        far = max(rel_l2(run.latents[k], b) for k, b in zip(("video", "audio"), bad))
        print(f"[{case}] {label}: rel L2 {far:.2e}")
        assert far > 10 * RUN_BOUND, (label, far)


def test_demo_runs_on_the_builtin_checkpoint(tmp_path):
    """``configs/ltx2_demo.yaml`` on ``builtin:tiny-random`` (the shipped LTX-2.5-style folder, bfloat16 DiT and
    decoders) writes an mp4 with every frame and an audio track; the LTX-2.5 ids refuse a run without
    ``num_frames`` in one line."""
    from vidax_core.io.video import read_mp4

    env = plugin_env(tmp_path / "entry", *ENTRY)
    out = tmp_path / "demo.mp4"
    proc = vidax("run", DEMO, "sampling.num_steps=2", f"output.path={out}", "output.metrics=", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames = read_mp4(str(out))
    assert frames.shape == (17, 64, 96, 3) and np.isfinite(frames).all()
    assert audio_stream_count(str(out)) == 1
    bad = vidax("run", "model.id=ltx-2.5-22b-distilled", "model.checkpoint=builtin:tiny-random", "prompt=a fox",
                "--dry-run", cwd=tmp_path, env=env)
    assert bad.returncode == 2, bad.stderr[-2000:]
    last = bad.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "sampling.num_frames" in last, last


def test_a_loaded_pipe_refuses_another_frame_rate():
    """The loaded DiT's audio layout follows the loading run's ``frame_rate``: a call at another rate is refused in
    one line (load again), before anything runs; other options still change per call."""
    import vidax
    from vidax_core.errors import UserError

    with vidax.load(DEMO, "sampling.num_steps=1") as pipe:
        with pytest.raises(UserError, match=r"options\.frame_rate is fixed when ltx-2\.5-22b-dev loads .*"
                                            r"load the model again with options\.frame_rate=30\.0"):
            pipe(prompt="a fox", options={"frame_rate": 30.0})
        pipe._model.plan_call(pipe._call_config({"prompt": "a fox", "options": {"stg_scale": 0.5}}))


@pytest.mark.parametrize("generation", ["ltx2.5", "ltx2.0"])
def test_cli_matches_ltx2_image_to_video(tmp_path, generation):
    from diffusers import LTX2ImageToVideoPipeline
    from PIL import Image

    from vidax_core.testing.reference import write_test_image
    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

    model_id, cross = {"ltx2.5": ("ltx-2.5-22b-dev", True), "ltx2.0": ("ltx-2-19b-dev", False)}[generation]
    pipe, ckpt = build_tiny_ltx2_pipeline(tmp_path / "tiny", generation, seed=3)
    pipe = LTX2ImageToVideoPipeline(**pipe.components)
    pipe.set_progress_bar_config(disable=True)
    image = write_test_image(tmp_path / "input.png")
    pil = Image.open(image).convert("RGB")
    noise = _noise()
    ref = dict(zip(("video", "audio"), _reference(pipe, noise, "latent", use_cross_timestep=cross, image=pil,
                                                  image_crf=0)))
    env = plugin_env(tmp_path / "entry", *ENTRY)
    args = [*_vidax_args(model_id, ckpt, image_crf=0), f"image={image}"]
    run = run_e2e(tmp_path, *args, noise=noise, env=env)
    errors = {k: rel_l2(run.latents[k], ref[k]) for k in ("video", "audio")}
    print(f"[{generation} i2v] rel L2 " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert all(v <= RUN_BOUND for v in errors.values()), errors
    np.testing.assert_allclose(run.latents["video"][:, :, 0], noise["video"][:, :, 0], rtol=1e-5, atol=1e-5)
    bad = _reference(pipe, noise, "latent", use_cross_timestep=not cross, image=pil, image_crf=0)
    far = max(rel_l2(run.latents[k], b) for k, b in zip(("video", "audio"), bad))
    print(f"[{generation} i2v] use_cross_timestep flipped: rel L2 {far:.2e}")
    assert far > 10 * RUN_BOUND, far
    if generation != "ltx2.5":
        return
    # the image path at LTX-2.5's default image_crf (18): without given latents the first frame holds the VAE
    # latents of the H.264-compressed image, as the reference's (its compression through PyAV)
    from diffusers.pipelines.ltx2.utils import apply_image_conditioning_crf

    plain = run_e2e(tmp_path / "image", *_vidax_args(model_id, ckpt), f"image={image}", env=env)
    compressed = Image.fromarray(apply_image_conditioning_crf(np.asarray(pil), 18))
    with torch.no_grad():
        pixels = pipe.video_processor.preprocess(compressed, height=SIZE, width=SIZE)
        want = pipe.vae.encode(pixels.unsqueeze(2)).latent_dist.mode().numpy()
    first = rel_l2(plain.latents["video"][:, :, :1], want)
    print(f"[{generation} i2v] first frame from the image: rel L2 {first:.2e}")
    assert first <= RUN_BOUND, first


def test_the_dry_run_lists_every_part_of_the_checkpoint(capsys):
    """The dry run's ``files:`` line names LTX-2's own parts (connectors, audio VAE, vocoder) beside the usual ones,
    as ``model_index.json`` lists them."""
    from vidax_core import cli

    assert cli.main(["run", DEMO, "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("files:"))
    assert line.split(None, 1)[1].split(", ") == ["transformer/", "vae/", "text_encoder/", "tokenizer/",
                                                   "scheduler/", "audio_vae/", "connectors/", "vocoder/"], line
