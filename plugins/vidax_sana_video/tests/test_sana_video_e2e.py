"""End to end: tiny diffusers ``SanaVideoPipeline`` / ``SanaImageToVideoPipeline`` and the real ``vidax run`` CLI,
from the same noise (the pipelines' ``latents=``, (B, C, F, H, W)).

diffusers (PyTorch, fp32) is the reference: its final latents (what ``output_type="latent"`` returns) and its frames
(``output_type="np"``). Cases:

* text-to-video: the checkpoint's DPM-Solver++ (flow), guidance 6 with a negative prompt, the complex human
  instruction before the prompt, a prompt with upper case and spaces the pipelines lower-case and strip;
* image-to-video (the same checkpoint through ``SanaImageToVideoPipeline``): the image at frame 0, timestep 0 there;
* resolution binning on (the pipelines' default): 848x464 asked, 832x480 sampled; the latents are compared (the
  frames' cover-and-crop resize is the core's, checked against diffusers' in tests/test_binning.py);
* a variant checkpoint: flow Euler, no guidance (the prompt alone), no instruction, an affine norm before the
  feed-forward and a learned-sigma head.

Latents within 1e-4 and frames within 5e-3 relative L2 (the issue's bounds; all land far below). The prompt
encoding is also compared on its own with the pipeline's ``encode_prompt``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import assert_run_matches, rel_l2  # noqa: E402
from vidax_core.testing.reference import reference_outputs, write_test_image  # noqa: E402
from vidax_sana_video.tiny import TINY_VAE, save_tiny_sana_video  # noqa: E402

pytestmark = pytest.mark.xdist_group("sana_video_e2e")

MODEL = "sana-video-2b-480p"
PROMPT = "  A Red Fox runs across a SNOWY field at dawn "
NEGATIVE = "Blurry, low quality"
H, W, F, STEPS, SEQ = 32, 64, 5, 3, 16
FRAME_BOUND = 5e-3
C = TINY_VAE["z_dim"]


def noise(shape, seed: int = 0) -> np.ndarray:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).numpy()


def latent_shape(h: int, w: int, f: int) -> tuple[int, ...]:
    return (1, C, (f - 1) // 4 + 1, h // 8, w // 8)


def call(guidance: float = 6.0, **kw) -> dict:
    return dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, frames=F, num_inference_steps=STEPS,
                guidance_scale=guidance, max_sequence_length=SEQ, use_resolution_binning=False, **kw)


def vidax_args(ckpt, guidance: float = 6.0, image=None, binning: bool = False, **sampling) -> list[str]:
    s = dict(num_steps=STEPS, height=H, width=W, num_frames=F, guidance_scale=guidance, max_sequence_length=SEQ)
    return run_args(MODEL, ckpt, PROMPT, NEGATIVE, image=image, sampling={**s, **sampling},
                    options={"use_resolution_binning": binning})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sana_video")
    ckpt, pipe = save_tiny_sana_video(folder / "ckpt", seed=1)
    pipe.set_progress_bar_config(disable=True)
    return folder, ckpt, pipe


def test_prompt_encoding_matches_encode_prompt(tiny):
    """The complex human instruction, lower-casing and select_index: vidax's Gemma-2 states and masks of the
    prompt and the negative prompt are the pipeline's."""
    from vidax_core import Checkpoint
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.checks import resolve
    from vidax_sana_video import text

    _, ckpt, pipe = tiny
    run = resolve(get_plugins(),
                  [f"model.id={MODEL}", f"model.checkpoint={ckpt}", f"sampling.max_sequence_length={SEQ}"])
    got = text.encode_for_run(text.load(Checkpoint(str(ckpt)), dtype=np.float32), [PROMPT, NEGATIVE], run)
    instruction = list(run.options["complex_human_instruction"])
    with torch.no_grad():
        pe, pm, ne, nm = pipe.encode_prompt(PROMPT, True, negative_prompt=NEGATIVE, max_sequence_length=SEQ,
                                            complex_human_instruction=instruction)
    want = np.concatenate([pe.numpy(), ne.numpy()])
    np.testing.assert_array_equal(got["mask"], np.concatenate([pm.numpy(), nm.numpy()]))
    assert got["hidden"].shape == want.shape == (2, SEQ, pipe.text_encoder.config.hidden_size)
    assert rel_l2(got["hidden"], want) < 1e-5, rel_l2(got["hidden"], want)


def test_t2v_cli_matches_diffusers(tiny):
    folder, ckpt, pipe = tiny
    x = noise(latent_shape(H, W, F))
    ref_latents, ref_frames = reference_outputs(pipe, x, **call())
    run = run_e2e(folder / "t2v", *vidax_args(ckpt), noise=x)
    _, frel = assert_run_matches("sana-video t2v", run.latents, run.frames, ref_latents, ref_frames,
                                 latent_shape=latent_shape(H, W, F), frame_shape=(1, F, H, W, 3))
    assert frel <= FRAME_BOUND


def test_i2v_cli_matches_diffusers(tiny):
    from diffusers import SanaImageToVideoPipeline
    from PIL import Image

    folder, ckpt, _ = tiny
    pipe = SanaImageToVideoPipeline.from_pretrained(str(ckpt))
    pipe.set_progress_bar_config(disable=True)
    image = write_test_image(folder / "input.png", size=(40, 56))
    x = noise(latent_shape(H, W, F), seed=2)
    ref_latents, ref_frames = reference_outputs(pipe, x, **call(image=Image.open(image).convert("RGB")))
    run = run_e2e(folder / "i2v", *vidax_args(ckpt, image=image), noise=x)
    _, frel = assert_run_matches("sana-video i2v", run.latents, run.frames, ref_latents, ref_frames,
                                 latent_shape=latent_shape(H, W, F), frame_shape=(1, F, H, W, 3))
    assert frel <= FRAME_BOUND
    assert rel_l2(run.latents[:, :, 1:], x[:, :, 1:]) > 0.1  # frames 1.. were denoised, frame 0 held


def test_binned_run_samples_at_the_bin(tiny):
    folder, ckpt, pipe = tiny
    x = noise(latent_shape(480, 832, 1), seed=3)
    with torch.no_grad():  # one step, no guidance: what binning changes is the size, not the loop
        ref = pipe(latents=torch.from_numpy(x), output_type="latent",
                   **dict(call(guidance=1.0), height=464, width=848, frames=1, num_inference_steps=1,
                          use_resolution_binning=True)).frames.numpy()
    run = run_e2e(folder / "binned", *vidax_args(ckpt, guidance=1.0, binning=True, height=464, width=848,
                                                 num_frames=1, num_steps=1), noise=x)
    print(f"[sana-video binned] latents rel {rel_l2(run.latents, ref):.3e}")
    assert run.latents.shape == ref.shape == latent_shape(480, 832, 1) and rel_l2(run.latents, ref) <= 1e-4
    assert run.frames.shape == (1, 1, 464, 848, 3)


def test_variant_checkpoint_matches_diffusers(tmp_path):
    """Flow Euler, guidance 1 (no negative branch), no instruction, norm_elementwise_affine, learned sigma."""
    ckpt, pipe = save_tiny_sana_video(tmp_path / "ckpt", seed=4, scheduler="euler",
                                      dit={"norm_elementwise_affine": True, "out_channels": 2 * C})
    pipe.set_progress_bar_config(disable=True)
    x = noise(latent_shape(H, W, F), seed=5)
    ref_latents, ref_frames = reference_outputs(pipe, x, **call(guidance=1.0, complex_human_instruction=[]))
    args = vidax_args(ckpt, guidance=1.0) + ["options.complex_human_instruction=null"]
    run = run_e2e(tmp_path / "run", *args, noise=x)
    _, frel = assert_run_matches("sana-video variant", run.latents, run.frames, ref_latents, ref_frames,
                                 latent_shape=latent_shape(H, W, F), frame_shape=(1, F, H, W, 3))
    assert frel <= FRAME_BOUND
