"""End to end: tiny diffusers ``HunyuanVideo15Pipeline`` / ``HunyuanVideo15ImageToVideoPipeline`` and the real
``vidax run`` CLI, from the same noise.

diffusers (PyTorch, fp32) is the reference: its latents (``output_type="latent"``) and the frames its VAE and
video processor make of them; vidax gets the same initial latents as ``sampling.initial_noise``. The prompt holds
quoted text (byT5 runs), guidance is the checkpoint's guider (CFG 6, two passes per step), the Qwen prompt is the
pipeline's full 1000 tokens after its 108-token crop. Both within the project's run bound (1e-4 relative L2). The
text matters: the reference with the wrong Qwen layer (``hidden_states[-2]``) or without the byT5 glyph text lands
far outside that bound. Image-to-video: a 50x30 image, which the pipeline crops to the 48x32 bucket of the tiny
DiT's target size 48; the reference without its SigLIP image tokens lands far outside the bound too. The
step-distilled id runs the meanflow DiT without guidance; feeding it this step's timestep as ``timestep_r``, or none,
lands far outside the bound.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env as cli_plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, assert_run_matches, rel_l2  # noqa: E402
from vidax_core.testing.reference import write_test_image  # noqa: E402
from vidax_hunyuan.hunyuan15_tiny import (TINY_VAE15, one_thread, save_tiny_hunyuan15,  # noqa: E402
                                          save_tiny_hunyuan15_i2v)

pytestmark = pytest.mark.xdist_group("hunyuan15_e2e")

PROMPT = 'a neon sign that reads "OPEN ALL NIGHT" glows above a door in the rain'
NEGATIVE = "blurry, low quality"
H, W, FRAMES, STEPS, SEED = 32, 48, 9, 3, 4
STEPS_DISTILLED = 4
LATENT = (1, TINY_VAE15["latent_channels"], (FRAMES - 1) // 4 + 1, H // 16, W // 16)
ENTRY = "hunyuan15 = vidax_hunyuan.hunyuan15_plugin:Hunyuan15Plugin"


def plugin_env(folder) -> dict:
    return cli_plugin_env(folder, *ENTRY.split(" = "))


def noise():
    return torch.randn(LATENT, generator=torch.Generator().manual_seed(SEED), dtype=torch.float32).numpy()


def reference(pipe, image=None, steps=STEPS):
    """The pipeline's final latents and its frames of them (one sampling run)."""
    from PIL import Image

    size = dict(height=H, width=W) if image is None else dict(image=Image.open(image).convert("RGB"))
    with torch.no_grad(), one_thread():
        latents = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, num_frames=FRAMES, num_inference_steps=steps,
                       latents=torch.from_numpy(noise()), output_type="latent", **size).frames
        video = pipe.vae.decode(latents / pipe.vae.config.scaling_factor, return_dict=False)[0]
        frames = pipe.video_processor.postprocess_video(video, output_type="np")
    return np.asarray(latents, np.float32), np.asarray(frames, np.float32)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hunyuan15_t2v")
    with one_thread():
        ckpt, pipe = save_tiny_hunyuan15(folder / "ckpt", seed=2)
    pipe.set_progress_bar_config(disable=True)
    return folder, ckpt, pipe, *reference(pipe)


def test_cli_matches_diffusers(tmp_path, case):
    folder, ckpt, _, ref_latents, ref_frames = case
    args = run_args("hunyuanvideo-1.5-t2v-480p", ckpt, PROMPT, NEGATIVE,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES))
    run = run_e2e(tmp_path, *args, noise=noise(), env=plugin_env(folder / "entry"))
    assert_run_matches("hunyuan15-t2v", run.latents, run.frames, ref_latents, ref_frames, latent_shape=LATENT,
                       frame_shape=(1, FRAMES, H, W, 3))


def test_text_variants_matter(case, monkeypatch):
    """The Qwen layer and the byT5 glyph text each move the reference's latents far past the run bound."""
    from diffusers.pipelines.hunyuan_video1_5 import pipeline_hunyuan_video1_5 as module

    _, _, pipe, ref_latents, _ = case
    mllm = module.HunyuanVideo15Pipeline._get_mllm_prompt_embeds

    def layer_minus_2(*args, **kwargs):
        return mllm(*args, **kwargs, num_hidden_layers_to_skip=1)

    monkeypatch.setattr(module.HunyuanVideo15Pipeline, "_get_mllm_prompt_embeds", staticmethod(layer_minus_2))
    wrong_layer, _ = reference(pipe)
    monkeypatch.undo()
    monkeypatch.setattr(module, "extract_glyph_texts", lambda prompt: None)
    no_byt5, _ = reference(pipe)
    for name, wrong in (("hidden_states[-2]", wrong_layer), ("no byT5", no_byt5)):
        print(f"[hunyuan15 {name}] latents rel {rel_l2(wrong, ref_latents):.3e}")
        assert rel_l2(wrong, ref_latents) > 100 * RUN_BOUND, name


@pytest.fixture(scope="module")
def i2v_case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hunyuan15_i2v")
    with one_thread():
        ckpt, pipe = save_tiny_hunyuan15_i2v(folder / "ckpt", seed=3)
    pipe.set_progress_bar_config(disable=True)
    image = write_test_image(folder / "input.png", size=(30, 50))
    return folder, ckpt, pipe, image, *reference(pipe, image)


def test_cli_matches_diffusers_i2v(tmp_path, i2v_case):
    folder, ckpt, _, image, ref_latents, ref_frames = i2v_case
    args = run_args("hunyuanvideo-1.5-i2v-480p", ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES))
    run = run_e2e(tmp_path, *args, noise=noise(), env=plugin_env(folder / "entry"))
    assert_run_matches("hunyuan15-i2v", run.latents, run.frames, ref_latents, ref_frames, latent_shape=LATENT,
                       frame_shape=(1, FRAMES, H, W, 3))


def test_image_tokens_matter(i2v_case, monkeypatch):
    _, _, pipe, image, ref_latents, _ = i2v_case
    encode_image = type(pipe).encode_image
    monkeypatch.setattr(type(pipe), "encode_image", lambda self, **kw: torch.zeros_like(encode_image(self, **kw)))
    wrong, _ = reference(pipe, image)
    print(f"[hunyuan15 i2v without image tokens] latents rel {rel_l2(wrong, ref_latents):.3e}")
    assert rel_l2(wrong, ref_latents) > 100 * RUN_BOUND


@pytest.fixture(scope="module")
def step_distilled_case(tmp_path_factory):
    """The step-distilled I2V recipe: a meanflow DiT (``timestep_r`` = the next timestep, 0 at the last step) and a
    guider at scale 1 (one pass per step), 4 steps."""
    folder = tmp_path_factory.mktemp("hunyuan15_step_distilled")
    with one_thread():
        ckpt, pipe = save_tiny_hunyuan15_i2v(folder / "ckpt", seed=5, dit={"use_meanflow": True},
                                             guider={"guidance_scale": 1.0})
    pipe.set_progress_bar_config(disable=True)
    image = write_test_image(folder / "input.png", size=(30, 50))
    return folder, ckpt, pipe, image, *reference(pipe, image, steps=STEPS_DISTILLED)


def test_cli_matches_diffusers_step_distilled(tmp_path, step_distilled_case):
    folder, ckpt, _, image, ref_latents, ref_frames = step_distilled_case
    args = run_args("hunyuanvideo-1.5-i2v-480p-step-distilled", ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS_DISTILLED, height=H, width=W, num_frames=FRAMES))
    run = run_e2e(tmp_path, *args, noise=noise(), env=plugin_env(folder / "entry"))
    assert_run_matches("hunyuan15-step-distilled", run.latents, run.frames, ref_latents, ref_frames,
                       latent_shape=LATENT, frame_shape=(1, FRAMES, H, W, 3))


def test_timestep_r_matters(step_distilled_case, monkeypatch):
    """The reference fed ``timestep_r`` = this step's timestep, or none, lands far outside the run bound."""
    _, _, pipe, image, ref_latents, _ = step_distilled_case
    forward = type(pipe.transformer).forward
    for name, swap in (("timestep_r = t", lambda kw: kw["timestep"]), ("no timestep_r", lambda kw: None)):
        def patched(self, *args, _swap=swap, **kw):
            return forward(self, *args, **{**kw, "timestep_r": _swap(kw)})

        monkeypatch.setattr(type(pipe.transformer), "forward", patched)
        wrong, _ = reference(pipe, image, steps=STEPS_DISTILLED)
        monkeypatch.undo()
        print(f"[hunyuan15 step-distilled, {name}] latents rel {rel_l2(wrong, ref_latents):.3e}")
        assert rel_l2(wrong, ref_latents) > 100 * RUN_BOUND, name


def test_demo_runs_on_the_builtin_checkpoint(tmp_path):
    """``configs/hunyuan15_demo.yaml`` on ``builtin:tiny-random`` (the shipped diffusers-layout folder, bfloat16 DiT)
    writes its video; an image-to-video id refuses that text-to-video checkpoint in one line."""
    from vidax_core.io.video import read_mp4
    from vidax_core.testing.cli import vidax

    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs", "hunyuan15_demo.yaml")
    env = plugin_env(tmp_path / "entry")
    out = tmp_path / "demo.mp4"
    proc = vidax("run", demo, "sampling.num_steps=2", f"output.path={out}", "output.metrics=", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames = read_mp4(str(out))
    assert frames.shape == (17, 64, 96, 3) and np.isfinite(frames).all()
    bad = vidax("run", demo, "model.id=hunyuanvideo-1.5-i2v-480p", f"image={write_test_image(tmp_path / 'a.png')}",
                "--dry-run", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error:"), bad.stderr[-2000:]
    assert "task_type='t2v'" in bad.stderr, bad.stderr[-2000:]
