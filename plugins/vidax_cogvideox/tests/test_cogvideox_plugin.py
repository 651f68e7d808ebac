"""CogVideoX plugin hooks: registry and presets, run checks and checkpoint checks (one `error:` line before any
weight loads), the SAT refusal, the sampler choice, the dynamic guidance formula, and T5 text encoding against
transformers (fp32, no mask)."""

from __future__ import annotations

import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from vidax_cogvideox.plugin import CogVideoXPlugin
from vidax_cogvideox.checks import checkpoint_config_problems
from vidax_core.plugins import get_plugins
from vidax_core.testing.cli import vidax

sys.path.insert(0, os.path.dirname(__file__))
from published import DITS, SCHEDULER, VAES  # noqa: E402

plugin = CogVideoXPlugin()

pytestmark = pytest.mark.xdist_group("cogvideox_plugin")

IDS = ("cogvideox-2b", "cogvideox-5b", "cogvideox-5b-i2v", "cogvideox1.5-5b", "cogvideox1.5-5b-i2v")


def _run(**over):
    s = dict(num_steps=50, guidance_scale=6.0, height=480, width=720, num_frames=49, seed=0,
             max_sequence_length=226, initial_noise=None)
    s.update(over.pop("sampling", {}))
    opts = dict(use_dynamic_cfg=False, scheduler_class=None)
    opts.update(over.pop("options", {}))
    return SimpleNamespace(sampling=SimpleNamespace(**s), options=opts, image=over.pop("image", None),
                           video=over.pop("video", None))


class _Ckpt:
    """Config files only, as check_checkpoint sees them."""

    def __init__(self, model_id, **dit):
        self.configs = {"transformer": {**DITS[model_id], **dit}, "vae": VAES[model_id],
                        "scheduler": dict(SCHEDULER)}

    def config(self, name):
        return self.configs[name]

    def has(self, name):
        return name in self.configs


def _spec(model_id):
    return get_plugins().registry.get(model_id)


def test_registered_ids_and_presets():
    reg = get_plugins().registry
    want = {"cogvideox-2b": (480, 720, 49, 8), "cogvideox-5b": (480, 720, 49, 8),
            "cogvideox-5b-i2v": (480, 720, 49, 8), "cogvideox1.5-5b": (768, 1360, 81, 16),
            "cogvideox1.5-5b-i2v": (768, 1360, 49, 16)}
    for mid, (h, w, f, fps) in want.items():
        spec = reg.get(mid)
        assert spec.family == "cogvideox" and spec.tasks == (("i2v",) if mid.endswith("i2v") else ("t2v",))
        s = spec.preset["sampling"]
        assert (s["height"], s["width"], s["num_frames"], spec.preset["output"]["fps"]) == (h, w, f, fps)
        assert (s["num_steps"], s["guidance_scale"], s["max_sequence_length"]) == (50, 6.0, 226)


@pytest.mark.parametrize("model_id", IDS)
def test_presets_pass_every_check(model_id):
    spec = _spec(model_id)
    s = spec.preset["sampling"]
    run = _run(sampling=dict(height=s["height"], width=s["width"], num_frames=s["num_frames"]),
               image="x.png" if model_id.endswith("i2v") else None)
    assert plugin.check_run(spec, run) == []
    assert checkpoint_config_problems(spec, _Ckpt(model_id), run) == []


@pytest.mark.parametrize("over, needle", [
    # the nearest valid count above
    (dict(sampling=dict(num_frames=50)), "sampling.num_frames must be 8k+1 for CogVideoX (the VAE compresses time by 4 "
                                         "and decodes an odd latent frame count), got 50: use 57"),
    (dict(sampling=dict(num_frames=45)), "got 45: use 49"),
    (dict(sampling=dict(num_frames=43)), "got 43: use 49"),
    (dict(sampling=dict(height=470)), "sampling.height must be a multiple of 16 for CogVideoX, got 470: use 464"),
    (dict(image="x.png"), "is a text-to-video model and takes no image"),
    (dict(video="v.mp4"), "takes no video input"),
])
def test_check_run_refusals(over, needle):
    problems = plugin.check_run(_spec("cogvideox-5b"), _run(**over))
    assert len(problems) == 1 and needle in problems[0], problems
    assert "\n" not in problems[0]


def test_tiling_knobs_are_checked():
    run = _run()
    run.vae = SimpleNamespace(tiling={"tile_sample_min_height": 240, "tile_overlap_factor_height": 1 / 6})
    assert plugin.check_run(_spec("cogvideox-5b"), run) == []
    run.vae = SimpleNamespace(tiling={"tile_overlap_factor_height": 1.5})
    problems = plugin.check_run(_spec("cogvideox-5b"), run)
    assert len(problems) == 1 and "tile_overlap_factor_height" in problems[0], problems


def test_i2v_needs_an_image():
    problems = plugin.check_run(_spec("cogvideox-5b-i2v"), _run())
    assert problems == ["cogvideox-5b-i2v is an image-to-video model: set image: <path to a png or jpg>"]


@pytest.mark.parametrize("model_id, size, ok", [
    ("cogvideox-5b-i2v", (480, 720), True),
    ("cogvideox-5b-i2v", (768, 1360), False),
    ("cogvideox-5b-i2v", (720, 480), False),
    ("cogvideox1.5-5b-i2v", (768, 1360), True),
    ("cogvideox1.5-5b-i2v", (1360, 768), True),
    ("cogvideox1.5-5b-i2v", (768, 1024), True),
    ("cogvideox1.5-5b-i2v", (480, 720), False),
    ("cogvideox1.5-5b-i2v", (768, 1376), False),
    ("cogvideox1.5-5b-i2v", (800, 1360), False),
    ("cogvideox1.5-5b", (480, 720), True),
])
def test_size_rules(model_id, size, ok):
    h, w = size
    problems = checkpoint_config_problems(_spec(model_id), _Ckpt(model_id), _run(sampling=dict(height=h, width=w)))
    assert (problems == []) == ok, problems
    if not ok:
        assert len(problems) == 1 and "runs only at 720x480" in problems[0] or "minimum side of 768" in problems[0]


def test_learned_table_fixes_the_text_length():
    problems = checkpoint_config_problems(_spec("cogvideox-5b-i2v"), _Ckpt("cogvideox-5b-i2v"),
                                   _run(sampling=dict(max_sequence_length=128)))
    assert problems == ["sampling.max_sequence_length must be 226 for cogvideox-5b-i2v (its learned position table "
                        "covers that many text tokens), got 128"]


def test_task_and_channels_must_fit():
    p = checkpoint_config_problems(_spec("cogvideox-5b-i2v"), _Ckpt("cogvideox-5b"), _run())
    assert len(p) == 1 and "is a text-to-video denoiser" in p[0]
    p = checkpoint_config_problems(_spec("cogvideox-5b"), _Ckpt("cogvideox-5b-i2v"), _run())
    assert any("is an image-to-video denoiser" in x for x in p)
    p = checkpoint_config_problems(_spec("cogvideox-5b"), _Ckpt("cogvideox-5b", out_channels=8, in_channels=8), _run())
    assert p == ["transformer/config.json: out_channels=8 does not match latent_channels=16 of vae/config.json"]


def test_sat_folder_is_one_error_line(tmp_path):
    sat = tmp_path / "CogVideoX-5b-sat"
    (sat / "transformer" / "1").mkdir(parents=True)
    (sat / "transformer" / "1" / "mp_rank_00_model_states.pt").write_bytes(b"\0")
    (sat / "transformer" / "latest").write_text("1")
    (sat / "vae").mkdir()
    (sat / "vae" / "3d-vae.pt").write_bytes(b"\0")
    proc = vidax("run", "model.id=cogvideox-5b", f"model.checkpoint={sat}", "prompt=a fox",
                 f"output.path={tmp_path / 'o.mp4'}", cwd=tmp_path)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "SAT" in lines[0] and "THUDM/CogVideoX-5b" in lines[0]


def test_5b_i2v_wrong_size_fails_before_loading(tmp_path):
    from published import write_config_folder

    folder = write_config_folder("cogvideox-5b-i2v", str(tmp_path / "ckpt"))  # configs only: no weight to load
    png = tmp_path / "x.png"
    from PIL import Image

    Image.new("RGB", (64, 64)).save(png)
    proc = vidax("run", "model.id=cogvideox-5b-i2v", f"model.checkpoint={folder}", "prompt=a fox", f"image={png}",
                 "sampling.height=768", "sampling.width=1360", f"output.path={tmp_path / 'o.mp4'}", cwd=tmp_path)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "runs only at 720x480" in lines[0], proc.stderr


def test_sampler_choice():
    """The checkpoint's DDIM by default; options.scheduler_class reads the same config as CogVideoX DPM (the
    official 5B demo's from_config)."""
    from vidax_core.schedulers.base import sampler_from_scheduler_config

    ckpt = _Ckpt("cogvideox-5b")
    assert plugin.scheduler(_spec("cogvideox-5b"), ckpt, _run()) is None
    assert sampler_from_scheduler_config(ckpt.config("scheduler")).name == "cogvideox_ddim"
    dpm = plugin.scheduler(_spec("cogvideox-5b"), ckpt, _run(options=dict(scheduler_class="CogVideoXDPMScheduler")))
    assert dpm.name == "cogvideox_dpm"
    assert (dpm.prediction_type, dpm.timestep_spacing, dpm.rescale_betas_zero_snr) == ("v_prediction", "trailing", True)


def test_dynamic_guidance_formula():
    from vidax_core.guidance import ClassifierFree, NoGuidance

    spec = _spec("cogvideox-5b")
    assert isinstance(plugin.guidance(spec, None, _run(sampling=dict(guidance_scale=1.0))), NoGuidance)
    g = plugin.guidance(spec, None, _run(options=dict(use_dynamic_cfg=True), sampling=dict(num_steps=50)))
    assert isinstance(g, ClassifierFree)
    ts = np.array([999.0, 979.0, 19.0], np.float32)
    want = [1 + 6.0 * (1 - math.cos(math.pi * ((50 - t) / 50) ** 5.0)) / 2 for t in ts.tolist()]
    np.testing.assert_allclose(g.scales(ts)["g"], want, rtol=1e-6)
    assert plugin.guidance(spec, None, _run()).scale == 6.0


def test_t5_text_matches_transformers(tmp_path):
    """Unmasked fp32 T5 v1.1 states of the padded prompt, as CogVideoXPipeline._get_t5_prompt_embeds."""
    import torch
    from transformers import AutoTokenizer, T5Config, T5EncoderModel

    from vidax_core.encoders.t5 import T5Config as VT5Config, load_t5
    from vidax_core import T5Text
    from vidax_core.encoders.tokenizer import TextTokenizer
    from vidax_core.testing.tiny.cogvideox import TINY_T5, write_spiece_tokenizer
    from vidax_core.testing.reference import randomize_

    tok_dir = write_spiece_tokenizer(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    ref = T5EncoderModel(T5Config(vocab_size=len(tok), **TINY_T5)).eval()
    randomize_(ref, 5, 0.3)
    prompts = ["a small red fox runs in the snow", ""]
    ids = tok(prompts, padding="max_length", max_length=16, truncation=True, add_special_tokens=True,
              return_tensors="pt").input_ids
    with torch.no_grad():
        want = ref(ids)[0].numpy()
    enc = T5Text(TextTokenizer.from_dir(str(tok_dir)), load_t5(
        VT5Config.from_config(ref.config.to_dict()), {k: v.numpy() for k, v in ref.state_dict().items()}))
    got = plugin.encode_prompt(None, enc, prompts, _run(sampling=dict(max_sequence_length=16)))
    assert got.shape == want.shape == (2, 16, TINY_T5["d_model"])
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"t5 text: max abs / max |ref| = {err:.2e}")
    assert err < 1e-5
