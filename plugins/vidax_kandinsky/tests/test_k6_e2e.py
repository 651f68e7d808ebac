"""End to end: tiny diffusers ``Kandinsky6TI2VAPipeline`` and the real ``vidax run`` CLI, from the same noise.

diffusers (PyTorch, fp32) is the reference: its latents (``output_type="latent"``: video (B, C, F, H, W), audio
(B, C_a, L)), the frames its VAE and video processor make of them and the waveform its audio VAE and vocoder make.
Both get the same ``latents=`` / ``audio_latents=`` (vidax as an .npz ``sampling.initial_noise``). Cases: text to
video+audio with flow Euler, guidance 5 and a negative prompt (two calls per step, contexts of different lengths),
its frames then through the super-resolution stage (``Kandinsky6SRPipeline``, compared by its frames);
image to video+audio with the distilled (PiFlow) checkpoint; the video alone (``sample_audio=False``). The VAE's
posterior is made sharp, so the image's posterior sample equals the mean vidax samples around with its own draw.
Latents (video and audio) within 1e-4 and frames within 5e-3 relative L2; the waveform within 1e-4.

The inputs matter: the reference with its image frame at its own RoPE position lands far past the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env as cli_plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, assert_run_matches, rel_l2  # noqa: E402
from vidax_core.testing.reference import write_test_image  # noqa: E402
from vidax_kandinsky.k6_conditioning import audio_frames  # noqa: E402
from vidax_kandinsky.k6_tiny import TINY_AUDIO_VAE, save_tiny_k6  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_e2e")

PROMPT = "a man with short gray hair plays a red electric guitar"
NEGATIVE = "blurry, low quality"
H, W, FRAMES, SEED = 32, 32, 9, 4
FRAME_BOUND = 5e-3
C, CA = 4, TINY_AUDIO_VAE["latent_channels"]
L = audio_frames(FRAMES, 4, 24.0, TINY_AUDIO_VAE["sample_rate"], 2 * TINY_AUDIO_VAE["hop_length"])


def noise() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    return {"video": rng.standard_normal((1, C, (FRAMES - 1) // 4 + 1, H // 8, W // 8)).astype(np.float32),
            "audio": rng.standard_normal((1, CA, L)).astype(np.float32)}


def reference(pipe, *, steps, guidance, image=None, audio=True):
    """The pipeline's final latents, its frames and its waveform from :func:`noise`."""
    from PIL import Image

    n = noise()
    extra = {} if image is None else {"image": Image.open(image).convert("RGB")}
    with torch.no_grad():
        out = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES,
                   num_inference_steps=steps, guidance_scale=guidance, latents=torch.from_numpy(n["video"]),
                   audio_latents=torch.from_numpy(n["audio"]) if audio else None, sample_audio=audio,
                   generator=torch.Generator().manual_seed(SEED), output_type="latent", **extra)
        z = out.frames / pipe.vae.config.scaling_factor
        frames = pipe.video_processor.postprocess_video(pipe.vae.decode(z, return_dict=False)[0], output_type="np")
        wave = None
        if audio:
            mel = pipe.audio_vae.decode(out.audio / pipe.audio_vae.config.scaling_factor, return_dict=False)[0]
            wave = pipe.vocoder(mel, return_dict=False)[0][:, 0].numpy()
    latents = {"video": out.frames.numpy(), "audio": out.audio.numpy()} if audio else out.frames.numpy()
    return latents, np.asarray(frames, np.float32), wave


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cli_plugin_env(tmp_path_factory.mktemp("k6_entry"), "kandinsky6",
                          "vidax_kandinsky.k6_plugin:Kandinsky6Plugin")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    ckpt, pipe = save_tiny_k6(tmp_path_factory.mktemp("k6") / "ckpt", seed=1)
    pipe.set_progress_bar_config(disable=True)
    return ckpt, pipe


@pytest.fixture(scope="module")
def distill(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k6_distill")
    ckpt, pipe = save_tiny_k6(folder / "ckpt", seed=2, distill=True)
    pipe.set_progress_bar_config(disable=True)
    return ckpt, pipe, write_test_image(folder / "input.png", size=(40, 24))


def check(tmp_path, env, model_id, ckpt, ref, *, steps, guidance, image=None, audio=True):
    ref_latents, ref_frames, ref_wave = ref
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=steps, height=H, width=W, num_frames=FRAMES, guidance_scale=guidance),
                    options=dict(sample_audio=audio))
    given = noise() if audio else noise()["video"]
    run = run_e2e(tmp_path, *args, noise=given, env=env, audio=audio, in_process=True)
    if audio:
        rel, frel = assert_run_matches(model_id, run.latents["video"], run.frames, ref_latents["video"],
                                       ref_frames, latent_shape=ref_latents["video"].shape,
                                       frame_shape=(1, FRAMES, H, W, 3))
        arel = rel_l2(run.latents["audio"], ref_latents["audio"])
        wrel = rel_l2(run.audio[..., 0] if run.audio.ndim == 3 else run.audio, ref_wave)
        print(f"[{model_id}] audio latents rel {arel:.3e}, waveform rel {wrel:.3e}")
        assert run.latents["audio"].shape == ref_latents["audio"].shape and arel <= RUN_BOUND
        assert wrel <= RUN_BOUND
        assert run.metrics.get("audio") is True
    else:
        rel, frel = assert_run_matches(model_id, run.latents, run.frames, ref_latents, ref_frames,
                                       latent_shape=ref_latents.shape, frame_shape=(1, FRAMES, H, W, 3))
    assert frel <= FRAME_BOUND


def test_t2va_with_sr_stage_cli_matches_diffusers(tmp_path, env, base):
    """Text to video+audio with CFG, then its frames through the SR stage (``options.super_resolution``: x2, 3 x 3
    tiles of the tiny SR checkpoint) in one ``vidax run``, against Kandinsky6TI2VAPipeline followed by
    Kandinsky6SRPipeline on its frames. The .npz noise holds the generation's ``video`` and ``audio`` and the SR's
    nine draws. Compared: the generation's latents (what ``save_latents`` keeps) and waveform, and the
    super-resolved frames (their input, the generation's frames, is compared directly by the other two cases)."""
    from test_k6sr_e2e import draws_for, reference as sr_reference

    from vidax_kandinsky.k6sr_tiny import save_tiny_sr

    ckpt, pipe = base
    sr_ckpt, sr_pipe = save_tiny_sr(tmp_path / "sr", seed=1)
    sr_pipe.set_progress_bar_config(disable=True)
    ref_latents, frames, ref_wave = reference(pipe, steps=3, guidance=5.0)
    draws = draws_for([(1, 3, 8, 8, 4)] * 9)
    _, ref_frames = sr_reference(sr_pipe, frames, draws, resolution_scale=2.0)  # the SR id's 4 steps
    args = run_args("kandinsky6-ti2va-lite", ckpt, PROMPT, NEGATIVE,
                    sampling=dict(num_steps=3, height=H, width=W, num_frames=FRAMES, guidance_scale=5.0),
                    options=dict(super_resolution="kandinsky6-vsr", sr_checkpoint=str(sr_ckpt),
                                 sr_resolution_scale=2.0))
    run = run_e2e(tmp_path, *args, noise={**noise(), **{f"noise_{k}": d for k, d in enumerate(draws)}}, env=env,
                  audio=True)
    rel = {k: rel_l2(run.latents[k], ref_latents[k]) for k in ("video", "audio")}
    wrel = rel_l2(run.audio[..., 0] if run.audio.ndim == 3 else run.audio, ref_wave)
    frel = rel_l2(run.frames, ref_frames)
    print(f"[k6 t2va + sr stage] latents rel {rel['video']:.3e}, audio latents {rel['audio']:.3e}, waveform "
          f"{wrel:.3e}, super-resolved frames {frel:.3e} {run.frames.shape}")
    assert run.frames.shape == ref_frames.shape == (1, FRAMES, 2 * H, 2 * W, 3)
    assert max(rel.values()) <= RUN_BOUND and wrel <= RUN_BOUND and frel <= FRAME_BOUND
    assert [s["model"] for s in run.metrics["stages"]] == ["kandinsky6-vsr"]


def test_video_only_cli_matches_diffusers(tmp_path, env, base):
    ckpt, pipe = base
    ref = reference(pipe, steps=2, guidance=5.0, audio=False)
    check(tmp_path, env, "kandinsky6-ti2va-lite", ckpt, ref, steps=2, guidance=5.0, audio=False)


def test_i2va_distilled_cli_matches_diffusers(tmp_path, env, distill, monkeypatch):
    ckpt, pipe, image = distill
    ref = reference(pipe, steps=3, guidance=1.0, image=image)
    check(tmp_path, env, "kandinsky6-ti2va-lite-distill", ckpt, ref, steps=3, guidance=1.0, image=image)
    # the reference frame's RoPE index and token type are exercised: at its own position it lands far off
    import diffusers.models.transformers.transformer_kandinsky6 as tk

    original = tk.Kandinsky6Transformer3DModel.forward

    def own_position(self, *args, **kwargs):
        kwargs["visual_rope_pos"] = None
        return original(self, *args, **kwargs)

    monkeypatch.setattr(tk.Kandinsky6Transformer3DModel, "forward", own_position)
    wrong, _, _ = reference(pipe, steps=3, guidance=1.0, image=image)
    print(f"[k6 i2va, tail at its own position] latents rel {rel_l2(wrong['video'], ref[0]['video']):.3e}")
    assert rel_l2(wrong["video"], ref[0]["video"]) > 20 * RUN_BOUND
