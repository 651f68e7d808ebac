"""Parity of the CLIP vision tower and its preprocessing against transformers (torch is the oracle)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
PIL_Image = pytest.importorskip("PIL.Image")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.encoders.clip_vision import (  # noqa: E402
    CLIPVisionConfig,
    encode_image,
    load_clip_vision,
    preprocess_images,
)

TINY = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, image_size=28,
            patch_size=7, hidden_act="gelu", layer_norm_eps=1e-5)


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _reference(ref, **inputs):
    """transformers' outputs in float64 and float32 on the same inputs (the fp32 reference's own error sets the
    tolerance)."""
    out = {}
    for dt in (torch.float64, torch.float32):
        m = copy.deepcopy(ref).to(dt)
        with torch.no_grad():
            o = m(**{k: v.to(dt) for k, v in inputs.items()}, output_hidden_states=True)
        out[dt] = ([h.double().numpy() for h in o.hidden_states], o.last_hidden_state.double().numpy(),
                   o.pooler_output.double().numpy())
    return out[torch.float64], out[torch.float32]


def _assert_close(what, got, want64, want32):
    err, ref_err = np.abs(np.asarray(got, np.float64) - want64).max(), np.abs(want32 - want64).max()
    print(f"{what}: vidax-vs-fp64 max abs {err:.2e} (rel {_rel(got, want64):.2e}); transformers fp32 {ref_err:.2e}")
    assert err <= 8 * max(ref_err, np.finfo(np.float32).eps * np.abs(want64).max()), what


@pytest.fixture(scope="module", params=["gelu", "quick_gelu"])
def models(request):
    torch.manual_seed(0)
    ref = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(**{**TINY, "hidden_act": request.param})).eval()
    with torch.no_grad():  # every parameter random, biases and LayerNorm affines included
        for name, p in ref.named_parameters():
            if "layer_norm" in name or "layrnorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / max(p.shape[-1], 1) ** 0.5 if p.ndim > 1 else torch.randn_like(p))
    # checkpoint naming as saved on disk (``vision_model.`` prefix) plus the non-persistent position ids
    tensors = {("vision_model." + k if not k.startswith("vision_model.") else k): v.numpy()
               for k, v in ref.state_dict().items()}
    tensors["vision_model.embeddings.position_ids"] = np.arange(17)[None]
    cfg = CLIPVisionConfig.from_config({**ref.config.to_dict(), "architectures": ["CLIPVisionModel"]})
    return ref, cfg, tensors, load_clip_vision(cfg, tensors)


def test_hidden_states_match_transformers(models):
    ref, _, _, enc = models
    px = np.random.default_rng(0).standard_normal((2, 3, 28, 28)).astype(np.float32)
    (hs, last64, pooled64), (hs32, last32, pooled32) = _reference(ref, pixel_values=torch.from_numpy(px))
    assert len(hs) == 4
    for i in (0, 1, -2, -1):
        got = np.asarray(enc.hidden_state(px, i))
        assert got.shape == hs[i].shape == (2, 17, 32)
        _assert_close(f"hidden_states[{i}]", got, hs[i], hs32[i])
    last, pooled = enc(px)
    _assert_close("last_hidden_state", last, last64, last32)
    _assert_close("pooler_output", pooled, pooled64, pooled32)


def test_preprocess_matches_clip_image_processor():
    rng = np.random.default_rng(1)
    proc = transformers.CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    for hw in ((37, 61), (80, 45), (28, 28), (300, 200)):
        img = PIL_Image.fromarray(rng.integers(0, 256, (*hw, 3), dtype=np.uint8))
        expected = proc(images=img, return_tensors="np")["pixel_values"]
        got = preprocess_images(img, size=28)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    # default (224) path, RGBA input converted to RGB, batch of two
    imgs = [PIL_Image.fromarray(rng.integers(0, 256, (250, 330, 4), dtype=np.uint8), "RGBA"),
            rng.integers(0, 256, (230, 224, 3), dtype=np.uint8)]
    expected = transformers.CLIPImageProcessor()(images=imgs, return_tensors="np")["pixel_values"]
    got = preprocess_images(imgs)
    assert got.shape == expected.shape == (2, 3, 224, 224)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_encode_image_end_to_end(models):
    ref, _, _, enc = models
    img = PIL_Image.fromarray(np.random.default_rng(2).integers(0, 256, (40, 52, 3), dtype=np.uint8))
    proc = transformers.CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    px = proc(images=img, return_tensors="pt")  # WanImageToVideoPipeline.encode_image
    (hs, _, _), (hs32, _, _) = _reference(ref, pixel_values=px["pixel_values"])
    _assert_close("encode_image", np.asarray(encode_image(enc, img)), hs[-2], hs32[-2])


def test_config_and_conversion_errors(models):
    _, cfg, tensors, _ = models
    full = CLIPVisionConfig.from_config({"vision_config": {"hidden_size": 1280, "num_hidden_layers": 32,
                                                           "num_attention_heads": 16, "patch_size": 14,
                                                           "intermediate_size": 5120, "hidden_act": "gelu"}})
    assert full.num_patches == 256 and full.hidden_act == "gelu"
    with pytest.raises(ValueError):
        CLIPVisionConfig(hidden_act="mystery")
    broken = dict(tensors)
    del broken["vision_model.encoder.layers.1.mlp.fc1.bias"]
    broken["vision_model.extra"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as err:
        load_clip_vision(cfg, broken)
    assert err.value.missing == ["blocks/mlp/fc1/bias layers [1]"]
    assert err.value.unexpected == ["vision_model.extra"]
