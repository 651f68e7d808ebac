"""Cosmos-Predict2.5 pieces against the reference and the run checks: the prompt embeddings equal the pipeline's
``_get_prompt_embeds`` (chat template, padding, per-layer normalisation, concatenation), the image resize equals
torch's nearest interpolation, and bad runs are refused with one line naming the key before any weight loads."""

from __future__ import annotations

import os

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_cosmos import text  # noqa: E402
from vidax_cosmos.plugin import CosmosPlugin  # noqa: E402
from vidax_cosmos.conditioning import resize_nearest  # noqa: E402
from vidax_cosmos.tiny import save_tiny_cosmos  # noqa: E402

plugin = CosmosPlugin()

pytestmark = pytest.mark.xdist_group("cosmos_plugin")

# the repository's demo config, by absolute path: the CLI runs wherever the test process stands
DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs", "cosmos_demo.yaml")

PROMPTS = ["a red car drives through the city streets at night", "The quick brown fox jumps over the lazy dog."]
MAX_LEN = 96


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.manual_seed(0)
    return save_tiny_cosmos(tmp_path_factory.mktemp("cosmos_plugin") / "ckpt", seed=7)


def test_prompt_embeddings_match_the_pipeline(ckpt):
    from diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict import Cosmos2_5_PredictBasePipeline

    from vidax_core.io.checkpoint import Checkpoint
    from vidax_cosmos.bench_reference import NoGuardrail

    pipe = Cosmos2_5_PredictBasePipeline.from_pretrained(str(ckpt), safety_checker=NoGuardrail())
    c = Checkpoint(str(ckpt))
    run = SimpleNamespace(model=SimpleNamespace(dtype="float32"), sampling=SimpleNamespace(max_sequence_length=MAX_LEN))
    enc = plugin.build_text_encoder(None, c, run, None)
    got = plugin.encode_prompt(None, enc, PROMPTS, run)

    def ref(dtype):
        pipe.text_encoder.to(dtype)
        with torch.no_grad():
            out = pipe._get_prompt_embeds(PROMPTS, max_sequence_length=MAX_LEN, device="cpu", dtype=dtype)
        pipe.text_encoder.to(torch.float32)
        return out.double().numpy()

    want64, want32 = ref(torch.float64), ref(torch.float32)
    ref_err = float(np.abs(want32 - want64).max())
    err = float(np.abs(got - want64).max())
    print(f"cosmos prompt embeddings: max_abs={err:.3e} (reference fp32 vs fp64 {ref_err:.3e}), shape {got.shape}")
    assert got.shape == want64.shape == (2, MAX_LEN, 32)
    assert err <= max(8 * ref_err, 1e-5)
    # the same token ids as transformers' apply_chat_template
    ids, _ = enc.tokenizer([text.chat_text(enc, p) for p in PROMPTS], MAX_LEN)

    def msgs(p):
        return [{"role": "system", "content": [{"type": "text", "text": text.SYSTEM_PROMPT}]},
                {"role": "user", "content": [{"type": "text", "text": p}]}]

    for row, p in zip(ids, PROMPTS):
        want = pipe.tokenizer.apply_chat_template(msgs(p), tokenize=True, add_generation_prompt=False,
                                                  max_length=MAX_LEN, truncation=True, padding="max_length")
        want = want["input_ids"] if hasattr(want, "keys") else want
        assert list(row) == list(want)


@pytest.mark.parametrize("src,dst", [((40, 56), (32, 48)), ((7, 9), (32, 48)), ((32, 48), (32, 48)),
                                     ((16, 24), (32, 48)), ((100, 30), (64, 96))])
def test_nearest_resize_equals_torch(src, dst):
    x = np.random.default_rng(0).random((3,) + src).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.from_numpy(x)[None], size=dst)[0].numpy()
    np.testing.assert_array_equal(resize_nearest(x, *dst), want)


def _run(**kw):
    sampling = dict(num_frames=93, height=704, width=1280, max_sequence_length=512)
    sampling.update(kw.pop("sampling", {}))
    return SimpleNamespace(sampling=SimpleNamespace(**sampling), image=kw.pop("image", None),
                           video=kw.pop("video", None), options=kw.pop("options", {}))


SPEC = SimpleNamespace(id="cosmos-predict2.5-2b")


@pytest.mark.parametrize("run,needle", [
    (_run(sampling={"num_frames": 90}), "sampling.num_frames must be 4k+1"),
    (_run(sampling={"height": 700}), "sampling.height must be a multiple of 16"),
    (_run(sampling={"width": 1270}), "sampling.width must be a multiple of 16"),
    (_run(image="a.png", video="b.mp4"), "only one of image: and video:"),
    (_run(video="b.mp4", options={"num_latent_conditional_frames": 3}), "num_latent_conditional_frames must be 1 or 2"),
    (_run(video="b.mp4", sampling={"num_frames": 5}), "needs more latent frames"),
    (_run(options={"conditional_frame_timestep": 5.0}), "conditional_frame_timestep must be at most 1"),
])
def test_check_run_refusals(run, needle):
    problems = plugin.check_run(SPEC, run)
    assert len(problems) == 1 and needle in problems[0], problems
    assert "\n" not in problems[0]


def test_check_run_accepts_the_defaults():
    assert plugin.check_run(SPEC, _run()) == []
    assert plugin.check_run(SPEC, _run(video="b.mp4", options={"num_latent_conditional_frames": 1})) == []


def test_cli_refuses_before_loading(tmp_path):
    from vidax_core.testing.cli import vidax

    proc = vidax("run", DEMO, "sampling.num_frames=16", f"output.path={tmp_path / 'x.mp4'}",
                 cwd=__import__("pathlib").Path(__file__).parents[3])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: sampling.num_frames must be 4k+1"), proc.stderr
    assert not (tmp_path / "x.mp4").exists()
