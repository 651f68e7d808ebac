"""End to end: tiny diffusers ``Cosmos3OmniPipeline``s (guardrail off) and the real ``vidax run`` CLI, from the same
noise.

diffusers (PyTorch, fp32) is the reference, drawing its own noise from a seeded ``torch.Generator`` (for
image-to-video the pipeline puts the encoded image into latent frame 0 of that draw); vidax gets the same draw as
``sampling.initial_noise``. Cases: a Nano-style model, text-to-video, default options; an Edge-style model,
image-to-video from an image of another size (resized and centre-cropped as the pipeline does) with the prompt
options changed (fps 16, no system prompt, no resolution sentence). Both within the project's run bound (1e-4
relative L2, latents and frames). The text matters: the reference run with a wrong prompt template, or with the
negative branch's video positions at the positive branch's offset, lands far outside that bound.
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
# case -> (variant, image-to-video, options: the pipeline call's names and values)
CASES = {
    "nano-t2v": ("nano", False, {}),
    "edge-i2v": ("edge", True, {"fps": 16.0, "use_system_prompt": False, "add_resolution_template": False}),
}


def write_image(folder):
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = (rng.random((40, 56, 3)) * 255).astype(np.uint8)
    pixels[:20] = pixels[:20] // 2 + 100
    Image.fromarray(pixels).save(folder / "input.png")
    return folder / "input.png"


def noise():
    return torch.randn(LATENT, generator=torch.Generator().manual_seed(SEED), dtype=torch.float32).numpy()


def reference(pipe, image=None, **options):
    """The pipeline's final latents (its last step callback: what ``output_type="latent"`` returns) and frames."""
    from PIL import Image

    seen = {}

    def grab(p, i, t, kw):
        seen["latents"] = kw["latents"].detach().clone()
        return {}

    extra = {"image": Image.open(image).convert("RGB")} if image is not None else {}
    frames = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, num_frames=FRAMES, height=H, width=W,
                  num_inference_steps=STEPS, guidance_scale=GUIDANCE, generator=torch.Generator().manual_seed(SEED),
                  output_type="np", enable_safety_check=False, callback_on_step_end=grab, **extra, **options).video
    return np.asarray(seen["latents"], np.float32), np.asarray(frames, np.float32)[None]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(case name, checkpoint folder, pipeline, image or None, reference latents, reference frames)."""
    name = request.param
    variant, i2v, options = CASES[name]
    folder = tmp_path_factory.mktemp(f"cosmos3_{name}")
    ckpt, pipe = save_tiny_cosmos3(folder / "ckpt", variant, seed=3)
    image = write_image(folder) if i2v else None
    return (name, ckpt, pipe, image, *reference(pipe, image, **options))


def test_cli_matches_diffusers(tmp_path, case):
    name, ckpt, _, image, ref_latents, ref_frames = case
    options = CASES[name][2]
    args = run_args(f"cosmos3-{CASES[name][0]}", ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES, guidance_scale=GUIDANCE),
                    options=options)
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
