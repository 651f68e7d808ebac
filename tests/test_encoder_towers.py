"""The public tower calls (vidax_core.encoders.towers, exported from vidax_core) on a checkpoint folder written by
transformers' ``save_pretrained``: each tower's config is read from its component folder, loaded and encoded, and
gives what the transformers model gives: Qwen2.5-VL's hidden states (a layer picked, the template prefix cropped,
the mask cropped alike), CLIP text's pooled output under a padding mask and an inner layer, SigLIP vision's last
state and pooled output, byT5 under a mask with the byte tokenizer read from the folder.

The towers' arithmetic is checked in depth by test_encoder_llm / _vit / _t5; this file checks the calls: a wrong
layer, a missing crop or a dropped mask moves the result by orders of magnitude more than the bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import vidax_core  # noqa: E402
from vidax_core import Checkpoint  # noqa: E402
from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.reference import randomize_  # noqa: E402

BOUND = 1e-5  # fp32 wiring check: the towers' own parity tests hold them to their fp32 error
TINY_TEXT = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A checkpoint folder with a tiny Qwen2.5-VL, CLIP text, SigLIP vision and byT5 (and its tokenizer)."""
    T = transformers
    root = tmp_path_factory.mktemp("towers")
    torch.manual_seed(0)
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=16, patch_size=2,
                  spatial_merge_size=1, temporal_patch_size=1, window_size=4, fullatt_block_indexes=[0])
    qwen = T.Qwen2_5_VLForConditionalGeneration(T.Qwen2_5_VLConfig(
        text_config=dict(vocab_size=64, num_key_value_heads=1, max_position_embeddings=64, **TINY_TEXT,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]}),
        vision_config=vision, vocab_size=64))
    clip = T.CLIPTextModel(T.CLIPTextConfig(vocab_size=50, max_position_embeddings=16, eos_token_id=49,
                                            pad_token_id=1, bos_token_id=0, **TINY_TEXT))
    siglip = T.SiglipVisionModel(T.SiglipVisionConfig(image_size=28, patch_size=7, **TINY_TEXT))
    byt5 = T.T5EncoderModel(T.T5Config(vocab_size=384, d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2,
                                       feed_forward_proj="gated-gelu", relative_attention_num_buckets=8))
    models = {"text_encoder": qwen, "text_encoder_2": clip, "image_encoder": siglip, "text_encoder_3": byt5}
    for i, (name, model) in enumerate(models.items()):
        randomize_(model.eval().float(), i + 1, 0.3)
        model.save_pretrained(str(root / name), safe_serialization=True)
    T.ByT5Tokenizer().save_pretrained(str(root / "tokenizer_3"))
    (root / "model_index.json").write_text(json.dumps({"_class_name": "TowersOnly"}))
    return str(root), models


def test_the_tower_calls_are_exported():
    for name in ("load_tokenizer", "load_llm", "encode_llm", "load_vit_tower", "encode_vit", "load_t5_tower",
                 "encode_t5", "DecoderLLMConfig", "ViTConfig", "T5Encoder", "render_chat", "prompt_clean"):
        assert getattr(vidax_core, name) is not None, name


def test_qwen_layer_crop_and_mask(folder):
    root, models = folder
    ckpt = Checkpoint(root)
    model = vidax_core.load_llm(ckpt, "text_encoder")
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 60, (2, 12)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0  # right padding on the second prompt
    with torch.no_grad():
        ref = models["text_encoder"](input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                     output_hidden_states=True).hidden_states
    crop = 4
    for layer in (-1, -2):
        hidden, cropped = vidax_core.encode_llm(model, ids, mask, layers=layer, crop_start=crop)
        want = ref[layer].numpy()[:, crop:]
        assert hidden.shape == want.shape and (cropped == mask[:, crop:]).all()
        valid = mask[:, crop:].astype(bool)
        err = rel_l2(hidden[valid], want[valid])
        print(f"Qwen2.5-VL hidden_states[{layer}] cropped {crop}: rel {err:.2e}")
        assert err < BOUND
    wrong = rel_l2(vidax_core.encode_llm(model, ids, mask, layers=-3, crop_start=crop)[0][valid],
                   ref[-2].numpy()[:, crop:][valid])
    assert wrong > 1e-2


def test_clip_text_pooled_with_mask_and_inner_layer(folder):
    root, models = folder
    model = vidax_core.load_vit_tower(Checkpoint(root), "text_encoder_2", "clip_text")
    ids = np.full((2, 16), 1, np.int64)
    ids[:, 0] = 0
    ids[0, 1:6], ids[0, 6] = np.arange(10, 15), 49
    ids[1, 1:11], ids[1, 11] = np.arange(20, 30), 49
    mask = (np.arange(16)[None] <= np.array([[6], [11]])).astype(np.int64)
    with torch.no_grad():
        ref = models["text_encoder_2"](input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                       output_hidden_states=True)
    hidden, pooled = vidax_core.encode_vit(model, ids, attention_mask=mask)
    assert rel_l2(pooled, ref.pooler_output.numpy()) < BOUND
    inner, none = vidax_core.encode_vit(model, ids, attention_mask=mask, layer=-2)
    assert none is None and rel_l2(inner, ref.hidden_states[-2].numpy()) < BOUND
    assert rel_l2(inner, ref.hidden_states[-1].numpy()) > 1e-2


def test_siglip_vision(folder):
    root, models = folder
    model = vidax_core.load_vit_tower(Checkpoint(root), "image_encoder", "siglip_vision")
    px = np.random.default_rng(1).standard_normal((1, 3, 28, 28)).astype(np.float32)
    with torch.no_grad():
        ref = models["image_encoder"](pixel_values=torch.from_numpy(px))
    hidden, pooled = vidax_core.encode_vit(model, px)
    assert rel_l2(hidden, ref.last_hidden_state.numpy()) < BOUND
    assert rel_l2(pooled, ref.pooler_output.numpy()) < BOUND


def test_byt5_with_its_tokenizer_and_mask(folder):
    root, models = folder
    ckpt = Checkpoint(root)
    tok = vidax_core.load_tokenizer(ckpt, "tokenizer_3")
    texts = ['Text "OPEN". ', "a"]
    ids, mask = tok(texts, 12)
    want = transformers.ByT5Tokenizer()(texts, padding="max_length", max_length=12, truncation=True)
    assert ids.tolist() == want["input_ids"] and mask.tolist() == want["attention_mask"]
    model = vidax_core.load_t5_tower(ckpt, "text_encoder_3")
    with torch.no_grad():
        ref = models["text_encoder_3"](input_ids=torch.from_numpy(ids.astype(np.int64)),
                                       attention_mask=torch.from_numpy(mask.astype(np.int64))).last_hidden_state
    got = vidax_core.encode_t5(model, ids, mask)
    valid = mask.astype(bool)
    assert rel_l2(got[valid], ref.numpy()[valid]) < BOUND
    assert rel_l2(vidax_core.encode_t5(model, ids)[valid], ref.numpy()[valid]) > 1e-3  # the mask matters
