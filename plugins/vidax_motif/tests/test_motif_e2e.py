"""End to end: tiny diffusers ``MotifVideoPipeline`` / ``MotifVideoImage2VideoPipeline`` and the real ``vidax run``
CLI, from the same noise, with one id for both tasks (image-to-video when ``image=`` is given).

diffusers (PyTorch, fp32) is the reference: its latents (``output_type="latent"``) and the frames its VAE and video
processor make of them. vidax gets the pipeline's ``latents=`` as ``sampling.initial_noise`` and leaves
``sampling.guidance_scale`` unset, so the checkpoint's guider (adaptive projected guidance with momentum, the
published recipe's settings) sets it; the scheduler shifts dynamically by the token count. Image-to-video builds the
first-frame condition latent and the SigLIP features itself; the VAE's posterior is made sharp (log-variance -30),
so the pipeline's posterior sample of the image, drawn from its generator, equals the mean vidax samples around with
its own. Latents within 1e-4 and frames within 5e-3 relative L2 (the issue's bounds; both land far below).

The inputs matter: the reference without the image's SigLIP tokens, or with the guider's momentum off, lands far
past the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env as cli_plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, assert_run_matches, rel_l2  # noqa: E402
from vidax_core.testing.reference import write_test_image  # noqa: E402
from vidax_motif.tiny import Z, save_tiny_motif  # noqa: E402

pytestmark = pytest.mark.xdist_group("motif_e2e")

PROMPT, NEGATIVE = "a red fox runs across a snowy field at dawn", "blurry, low quality"
H, W, FRAMES, STEPS, TEXT = 32, 48, 9, 3, 16
FRAME_BOUND = 5e-3
LATENT_SHAPE = (1, Z, (FRAMES - 1) // 4 + 1, H // 8, W // 8)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The checkpoint, both reference pipelines (one set of components), the image, the CLI environment, the noise."""
    from diffusers import MotifVideoImage2VideoPipeline

    folder = tmp_path_factory.mktemp("motif")
    ckpt, t2v = save_tiny_motif(folder / "ckpt", "t2v", seed=1, sharp_posterior=True)
    i2v = MotifVideoImage2VideoPipeline(**t2v.components)
    for pipe in (t2v, i2v):
        pipe.set_progress_bar_config(disable=True)
    image = write_test_image(folder / "input.png", size=(40, 56))
    env = cli_plugin_env(folder / "entry", "motif", "vidax_motif.plugin:MotifPlugin")
    noise = torch.randn(LATENT_SHAPE, generator=torch.Generator().manual_seed(3)).numpy()
    return ckpt, {"t2v": t2v, "i2v": i2v}, image, env, noise


def reference(pipe, noise, image=None) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    kw = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES, num_inference_steps=STEPS,
              max_sequence_length=TEXT)
    if image is not None:
        kw["image"] = Image.open(image).convert("RGB")
    out = []
    for output_type in ("latent", "np"):
        with torch.no_grad():
            out.append(np.asarray(pipe(latents=torch.from_numpy(noise), output_type=output_type,
                                       generator=torch.Generator().manual_seed(0), **kw).frames, np.float32))
    return out[0], out[1]


def check_cli(tmp_path, case, task: str):
    ckpt, pipes, image, env, noise = case
    image = image if task == "i2v" else None
    ref_latents, ref_frames = reference(pipes[task], noise, image)
    args = run_args("motif-video-2b", ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES, max_sequence_length=TEXT))
    run = run_e2e(tmp_path, *args, noise=noise, env=env)
    _, frel = assert_run_matches(f"motif {task}", run.latents, run.frames, ref_latents, ref_frames,
                                 latent_shape=LATENT_SHAPE, frame_shape=(1, FRAMES, H, W, 3))
    assert frel <= FRAME_BOUND
    return run.latents


@pytest.fixture(scope="module")
def vidax_latents(case, tmp_path_factory):
    return {task: check_cli(tmp_path_factory.mktemp(task), case, task) for task in ("t2v", "i2v")}


def test_t2v_cli_matches_diffusers(vidax_latents):
    assert vidax_latents["t2v"].shape == LATENT_SHAPE


def test_i2v_cli_matches_diffusers(vidax_latents):
    assert vidax_latents["i2v"].shape == LATENT_SHAPE
    assert rel_l2(vidax_latents["i2v"], vidax_latents["t2v"]) > 100 * RUN_BOUND  # the image conditions the run


def test_image_tokens_and_momentum_matter(case, vidax_latents, monkeypatch):
    """The reference without the image's SigLIP tokens, and with the guider's momentum off, each land far past the
    run bound: both reach vidax's latents."""
    from diffusers import MotifVideoImage2VideoPipeline

    _, pipes, image, _, noise = case
    with monkeypatch.context() as m:
        m.setattr(MotifVideoImage2VideoPipeline, "_get_image_embeds", staticmethod(lambda *a, **k: None))
        no_tokens, _ = reference(pipes["i2v"], noise, image)
    guider = pipes["t2v"].guider
    pipes["t2v"].guider = guider.new(adaptive_projected_guidance_momentum=None)
    try:
        no_momentum, _ = reference(pipes["t2v"], noise)
    finally:
        pipes["t2v"].guider = guider
    for name, wrong, task in (("no SigLIP tokens", no_tokens, "i2v"), ("no momentum", no_momentum, "t2v")):
        print(f"[motif {name}] latents rel {rel_l2(wrong, vidax_latents[task]):.3e}")
        assert rel_l2(wrong, vidax_latents[task]) > 20 * RUN_BOUND, name
