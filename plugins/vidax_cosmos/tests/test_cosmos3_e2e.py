"""End to end: tiny diffusers ``Cosmos3OmniPipeline``s (guardrail off) and the real ``vidax run`` CLI, from the same
noise.

diffusers (PyTorch, fp32) is the reference, drawing its own noise from a seeded ``torch.Generator`` (for
image-to-video the pipeline puts the encoded image into latent frame 0 of that draw); vidax gets the same draw as
``sampling.initial_noise``. Cases: a Nano-style model, text-to-video, default options; an Edge-style model,
image-to-video from an image of another size (resized and centre-cropped as the pipeline does) with the prompt
options changed (fps 16, no system prompt, no resolution sentence); a Nano-style model, video-to-video from a
7-frame clip of another size with latent frames 0 and 2 kept clean (9 pixel frames: the clip's 7, its last one
repeated twice). All within the project's run bound (1e-4 relative L2, latents and frames). The text matters: the
reference run with a wrong prompt template, or with the negative branch's video positions at the positive branch's
offset, lands far outside that bound; so do the clean latent frames (the video case with the default [0, 1]).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, assert_run_matches, rel_l2  # noqa: E402
from vidax_cosmos.cosmos3_tiny import save_tiny_cosmos3  # noqa: E402

pytestmark = pytest.mark.xdist_group("cosmos3_e2e")

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
H, W, FRAMES, STEPS, GUIDANCE, SEED = 48, 64, 9, 3, 3.0, 5
LATENT = (1, 4, (FRAMES - 1) // 4 + 1, H // 16, W // 16)
# case -> (variant, conditioning medium, options: the pipeline call's names and values)
CASES = {
    "nano-t2v": ("nano", None, {}),
    "edge-i2v": ("edge", "image", {"fps": 16.0, "use_system_prompt": False, "add_resolution_template": False}),
    "nano-v2v": ("nano", "video", {"condition_frame_indexes_vision": [0, 2]}),
}


def write_image(folder):
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = (rng.random((40, 56, 3)) * 255).astype(np.uint8)
    pixels[:20] = pixels[:20] // 2 + 100
    Image.fromarray(pixels).save(folder / "input.png")
    return folder / "input.png"


def write_clip(folder):
    from vidax_core.io.video import write_mp4

    rng = np.random.default_rng(2)
    clip = np.clip(rng.random((7, 40, 56, 3)) * 0.5 + np.linspace(0, 0.5, 7)[:, None, None, None], 0, 1)
    write_mp4(str(folder / "input.mp4"), clip.astype(np.float32), 8)
    return folder / "input.mp4"


def clip_frames(path):
    """The clip as the PIL frames a pipeline user passes (``video=``), decoded as vidax decodes it."""
    from PIL import Image

    from vidax_core.io.clip import read_video

    return [Image.fromarray(f) for f in np.round(read_video(str(path)) * 255).astype(np.uint8)]


def noise():
    return torch.randn(LATENT, generator=torch.Generator().manual_seed(SEED), dtype=torch.float32).numpy()


def reference(pipe, medium=None, kind=None, **options):
    """The pipeline's final latents (its last step callback: what ``output_type="latent"`` returns) and frames."""
    from PIL import Image

    seen = {}

    def grab(p, i, t, kw):
        seen["latents"] = kw["latents"].detach().clone()
        return {}

    extra = ({"image": Image.open(medium).convert("RGB")} if kind == "image" else
             {"video": clip_frames(medium)} if kind == "video" else {})
    frames = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, num_frames=FRAMES, height=H, width=W,
                  num_inference_steps=STEPS, guidance_scale=GUIDANCE, generator=torch.Generator().manual_seed(SEED),
                  output_type="np", enable_safety_check=False, callback_on_step_end=grab, **extra, **options).video
    return np.asarray(seen["latents"], np.float32), np.asarray(frames, np.float32)[None]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(case name, checkpoint folder, pipeline, image/clip or None, reference latents, reference frames)."""
    name = request.param
    variant, kind, options = CASES[name]
    folder = tmp_path_factory.mktemp(f"cosmos3_{name}")
    ckpt, pipe = save_tiny_cosmos3(folder / "ckpt", variant, seed=3)
    medium = {"image": write_image, "video": write_clip}[kind](folder) if kind else None
    return (name, ckpt, pipe, medium, *reference(pipe, medium, kind, **options))


def test_cli_matches_diffusers(tmp_path, case):
    name, ckpt, _, medium, ref_latents, ref_frames = case
    variant, kind, options = CASES[name]
    args = run_args(f"cosmos3-{variant}", ckpt, PROMPT, NEGATIVE, image=medium if kind == "image" else None,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES, guidance_scale=GUIDANCE),
                    options=options)
    if kind == "video":
        args.append(f"video={medium}")
    run = run_e2e(tmp_path, *args, noise=noise())
    assert_run_matches(name, run.latents, run.frames, ref_latents, ref_frames, latent_shape=LATENT,
                       frame_shape=(1, FRAMES, H, W, 3))


@pytest.mark.parametrize("case", ["nano-t2v"], indirect=True, scope="module")
def test_text_and_branch_offsets_matter(case, monkeypatch):
    """A wrong template (no duration sentence) or the negative branch at the positive branch's video offset moves
    the reference's own latents far past the run bound, so the parity above pins both."""
    _, _, pipe, _, ref_latents, _ = case
    wrong_template, _ = reference(pipe, add_duration_template=False)
    assert rel_l2(wrong_template, ref_latents) > 100 * RUN_BOUND

    segment = type(pipe)._prepare_vision_segment
    offsets = []

    def same_offset(self, *args, mrope_offset, **kwargs):
        offsets.append(mrope_offset)
        return segment(self, *args, mrope_offset=offsets[0], **kwargs)

    monkeypatch.setattr(type(pipe), "_prepare_vision_segment", same_offset)
    wrong_offset, _ = reference(pipe)
    assert offsets[0] != offsets[1]  # the two branches' prompts differ in length
    assert rel_l2(wrong_offset, ref_latents) > 100 * RUN_BOUND


@pytest.mark.parametrize("case", ["nano-v2v"], indirect=True, scope="module")
def test_clean_latent_frames_matter(case):
    """The video case with the default clean frames [0, 1] instead of [0, 2] moves the reference's own latents far
    past the run bound, so the parity above pins condition_frame_indexes_vision."""
    _, _, pipe, clip, ref_latents, _ = case
    default, _ = reference(pipe, clip, "video")
    assert rel_l2(default, ref_latents) > 100 * RUN_BOUND
