"""The HunyuanVideo-1.5 ids' hooks against ``HunyuanVideo15Pipeline``: the pipeline's constants (system message,
crop, text lengths), its default size buckets, its glyph-text extraction, ``encode_prompt`` (Qwen
``hidden_states[-3]`` cropped at 108 with its mask, byT5 on the quoted text, zeros without quotes) against the
float64 reference, the guider config read as the guider applies it, and bad runs refused with one line each."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_hunyuan import hunyuan15_presets as presets  # noqa: E402
from vidax_hunyuan.hunyuan15_plugin import Hunyuan15Plugin  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan15_plugin")

plugin = Hunyuan15Plugin()
T2V = SimpleNamespace(id="hunyuanvideo-1.5-t2v-480p", tasks=("t2v",))
PROMPTS = ['a neon sign reads "OPEN 24h" above a door, and a mug says “café”, then "OPEN 24h" again',
           "a red car drives through the city streets at night", ""]


def _run(options=None, image=None, video=None, **sampling):
    s = dict(num_frames=121, height=480, width=848, max_sequence_length=1000, guidance_scale=6.0, num_steps=50)
    s.update(sampling)
    return SimpleNamespace(sampling=SimpleNamespace(**s), options=dict(options or {}), image=image, video=video,
                           model=SimpleNamespace(dtype="float32"))


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    from vidax_hunyuan.hunyuan15_tiny import one_thread, save_tiny_hunyuan15

    with one_thread():
        return save_tiny_hunyuan15(tmp_path_factory.mktemp("hy15") / "ckpt", seed=1)


def test_registered_with_the_pipeline_recipe():
    from vidax_core.plugins import Plugins

    p = Plugins()
    p.add(Hunyuan15Plugin(), "hunyuan15")
    for mid, size in (("hunyuanvideo-1.5-t2v-480p", (480, 848)), ("hunyuanvideo-1.5-t2v-720p", (720, 1280))):
        spec = p.registry.get(mid)
        assert spec.family == "hunyuan" and spec.tasks == ("t2v",) and set(spec.options) == {"tokenizer_2_max_length"}
        s = spec.preset["sampling"]
        assert (s["height"], s["width"]) == size and s["num_frames"] == 121 and s["num_steps"] == 50
        assert s["guidance_scale"] == 6.0 and s["max_sequence_length"] == 1000 and spec.preset["output"]["fps"] == 24


def test_constants_and_sizes_are_the_pipelines(pipe):
    from diffusers.pipelines.hunyuan_video1_5.image_processor import HunyuanVideo15ImageProcessor

    _, p = pipe
    assert presets.SYSTEM_MESSAGE == p.system_message
    assert (presets.CROP_START, presets.QWEN_LENGTH, presets.BYT5_LENGTH, presets.IMAGE_TOKENS) == (
        p.prompt_template_encode_start_idx, p.tokenizer_max_length, p.tokenizer_2_max_length,
        p.vision_num_semantic_tokens)
    proc = HunyuanVideo15ImageProcessor(vae_scale_factor=16)
    for target in (640, 960):
        assert presets.default_size(target) == tuple(proc.calculate_default_height_width(9, 16, target))
        for h, w in ((720, 1280), (1280, 720), (500, 500), (333, 1000)):  # I2V's image-derived sizes
            assert presets.closest_size(h, w, target) == tuple(proc.calculate_default_height_width(h, w, target))


def test_glyph_text_is_the_pipelines():
    from diffusers.pipelines.hunyuan_video1_5.pipeline_hunyuan_video1_5 import extract_glyph_texts

    from vidax_hunyuan.hunyuan15_text import glyph_text

    for prompt in PROMPTS + ['one "x"', 'empty "" quotes', '"a" "b" "a"', "unclosed \"quote"]:
        assert glyph_text(prompt) == extract_glyph_texts(prompt), prompt


def test_prompt_embeddings_match_the_pipeline(pipe):
    from vidax_core.io.checkpoint import Checkpoint

    from vidax_hunyuan.hunyuan15_tiny import one_thread

    folder, p = pipe
    run = _run()
    enc = plugin.build_text_encoder(T2V, Checkpoint(str(folder)), run, None)
    got = plugin.encode_prompt(T2V, enc, PROMPTS, run)

    def ref(dtype):
        p.text_encoder.to(dtype)
        p.text_encoder_2.to(dtype)
        with torch.no_grad(), one_thread():
            out = p.encode_prompt(PROMPTS, device="cpu", dtype=dtype, batch_size=len(PROMPTS))
        p.text_encoder.float()
        p.text_encoder_2.float()
        return [t.double().numpy() for t in out]

    (h64, _, b64, _), (h32, m32, b32, bm32) = ref(torch.float64), ref(torch.float32)
    np.testing.assert_array_equal(got["mask"], m32)
    np.testing.assert_array_equal(got["mask_2"], bm32)
    assert got["mask"].sum(1).min() > 0 and (got["mask"] == 0).any()  # every prompt kept, padded
    assert got["mask_2"][0].sum() > 0 and not got["mask_2"][1:].any()  # byT5 on the quoted prompt only
    for name, g, w32, w64 in (("qwen", got["hidden"], h32, h64), ("byt5", got["hidden_2"], b32, b64)):
        ref_err = float(np.abs(w32 - w64).max())
        err = float(np.abs(g - w64).max())
        print(f"hunyuan15 {name}: max_abs={err:.3e} (reference fp32 vs fp64 {ref_err:.3e}) shape {g.shape}")
        assert g.shape == w64.shape and err <= max(8 * ref_err, 1e-6)
    assert np.abs(got["hidden_2"][0]).max() > 0.1  # the quoted text really went through byT5


def test_guider_config_drives_guidance(pipe, monkeypatch):
    from vidax_core.guidance import ClassifierFree, NoGuidance
    from vidax_core.io.checkpoint import Checkpoint

    from vidax_core.guidance import WindowedClassifierFree
    from vidax_core.guiders import guider_json, read_guider
    from vidax_hunyuan.hunyuan15_guidance import guidance

    folder, p = pipe
    ckpt = Checkpoint(str(folder))
    name, fields = read_guider(guider_json(ckpt))
    assert name == type(p.guider).__name__ and all(fields[k] == p.guider.config[k] for k in fields)
    g = plugin.guidance(T2V, ckpt, _run(guidance_scale=4.5))
    assert isinstance(g, ClassifierFree) and g.scale == 4.5 and g.formula == "uncond"
    assert isinstance(plugin.guidance(T2V, ckpt, _run(guidance_scale=1.0)), NoGuidance)

    class Fake:  # a checkpoint whose guider says otherwise
        def __init__(self, **cfg):
            self.cfg = cfg

    monkeypatch.setattr("vidax_hunyuan.hunyuan15_guidance.guider_json", lambda ckpt: ckpt.cfg)
    assert isinstance(guidance(Fake(enabled=False), _run()), NoGuidance)
    orig = guidance(Fake(use_original_formulation=True), _run(guidance_scale=1.0))
    assert isinstance(orig, ClassifierFree) and orig.formula == "cond"
    assert isinstance(guidance(Fake(use_original_formulation=True), _run(guidance_scale=0.0)), NoGuidance)
    win = guidance(Fake(start=0.25, stop=0.75), _run(num_steps=10))
    assert isinstance(win, WindowedClassifierFree)
    # the reference guider's own window: CFG at steps int(0.25 * 10) <= i < int(0.75 * 10)
    np.testing.assert_array_equal(win.scales(np.zeros(10))["g"], [1, 1, 6, 6, 6, 6, 6, 1, 1, 1])


@pytest.mark.parametrize("change,needle", [
    (dict(num_frames=120), "num_frames"),
    (dict(height=470), "height"),
    (dict(options={"tokenizer_2_max_length": 0}), "tokenizer_2_max_length"),
    (dict(image="x.png"), "text-to-video"),
    (dict(video="x.mp4"), "video"),
])
def test_bad_runs_are_one_line(change, needle):
    options = change.pop("options", None)
    image, video = change.pop("image", None), change.pop("video", None)
    problems = plugin.check_run(T2V, _run(options, image, video, **change))
    assert len(problems) == 1 and needle in problems[0] and "\n" not in problems[0], problems
    assert plugin.check_run(T2V, _run()) == []


def test_bench_reference_is_the_15_pipeline(tmp_path):
    """``vidax bench --reference diffusers`` gets the 1.5 pipelines' reference for every 1.5 id; a folder that is
    not a diffusers pipeline (the original release) and a scheduler override are refused in one line."""
    from vidax_core.errors import UserError
    from vidax_core.family import diffusers_reference
    from vidax_hunyuan.hunyuan15_bench_reference import Hunyuan15DiffusersReference

    (tmp_path / "model_index.json").write_text("{}")
    run = _run()
    run.sampling.scheduler = None
    for spec in (SimpleNamespace(id=m["id"], tasks=m["tasks"]) for m in presets.MODELS):
        ref = diffusers_reference(plugin, "diffusers", str(tmp_path), run)
        assert isinstance(ref, Hunyuan15DiffusersReference), spec.id
    with pytest.raises(UserError, match="not a diffusers-layout pipeline folder"):
        diffusers_reference(plugin, "diffusers", str(tmp_path / "release"), run)
    run.sampling.scheduler = "unipc"
    with pytest.raises(UserError, match="leave sampling.scheduler unset"):
        diffusers_reference(plugin, "diffusers", str(tmp_path), run)
