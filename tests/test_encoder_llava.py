"""LLaVA image-text encoder (vidax_core.encoders.llava) against transformers' LlavaForConditionalGeneration on
tiny random models: every hidden state of the language model (output_hidden_states=True) with image features
scattered over the image tokens, for one feature layer without the class token ("default", as HunyuanVideo-I2V's
llava-llama-3-8b) and for two concatenated layers with it ("full"); padding in the batch; the checkpoint as
transformers 5 saves it (language_model.model. / vision_tower. / multi_modal_projector.) and as it holds it in memory
(model.language_model. / model.vision_tower. / model.multi_modal_projector.). Tolerance: vidax
in fp32 within FACTOR x both implementations' own fp32 errors, against the reference run in float64.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax  # noqa: E402
from flax import nnx  # noqa: E402

from vidax_core.encoders import llava  # noqa: E402
from vidax_core.errors import UserError  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_error  # noqa: E402

pytestmark = pytest.mark.xdist_group("encoder_llava")

FACTOR = 4.0  # as vidax_core.testing.parity: times both implementations' own fp32 errors
VOCAB, IMAGE_TOKEN, IMAGE = 96, 95, 28  # 28 px / patch 14: 4 patches (+ the class token)


def _build(layer, strategy, tmp_path):
    text = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                    max_position_embeddings=128)
    vision = transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                                           num_attention_heads=2, image_size=IMAGE, patch_size=14,
                                           hidden_act="quick_gelu")
    cfg = transformers.LlavaConfig(text_config=text, vision_config=vision, image_token_id=IMAGE_TOKEN,
                                   vision_feature_layer=layer, vision_feature_select_strategy=strategy,
                                   projector_hidden_act="gelu")
    torch.manual_seed(0)
    model = transformers.LlavaForConditionalGeneration(cfg).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "embed" in name else 0.15)
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)
    model.save_pretrained(tmp_path)
    from safetensors.numpy import load_file

    tensors = load_file(str(tmp_path / "model.safetensors"))
    import json

    config = json.loads((tmp_path / "config.json").read_text())
    return model, config, tensors


def _inputs(n_img: int, seed: int = 0):
    """Two prompts, right-padded, each with one image (n_img tokens) in the middle."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, IMAGE_TOKEN, (2, 4 + n_img + 5))
    ids[:, 4:4 + n_img] = IMAGE_TOKEN
    mask = np.ones_like(ids)
    mask[1, -3:] = 0
    ids[1, -3:] = 0
    pixels = rng.standard_normal((2, 3, IMAGE, IMAGE)).astype(np.float32)
    return ids, mask, pixels


def _reference(model, ids, mask, pixels) -> np.ndarray:
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                    pixel_values=torch.from_numpy(pixels).to(dtype), output_hidden_states=True)
    return np.stack([h.numpy() for h in out.hidden_states])


def _err(a, b, mask) -> float:
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) * mask[None, :, :, None]
    return float(d.max())


@pytest.mark.parametrize("layer,strategy", [(-2, "default"), ([-3, -1], "full")])
def test_llava_matches_transformers(tmp_path, layer, strategy):
    model, config, tensors = _build(layer, strategy, tmp_path)
    # transformers 5 saves the original llava-hf names; in memory it holds the model.* layout: both load the same
    assert {k.split(".")[0] for k in tensors} == {"language_model", "vision_tower", "multi_modal_projector"}
    in_memory = {k: v.numpy() for k, v in model.state_dict().items()}
    assert {k.split(".")[1] for k in in_memory if k.startswith("model.")} == {
        "language_model", "vision_tower", "multi_modal_projector"}
    cfg = llava.LlavaConfig.from_config(config)
    enc = llava.load_llava(cfg, tensors)
    twin = llava.load_llava(cfg, in_memory)
    for a, b in zip(jax.tree.leaves(nnx.state(enc)), jax.tree.leaves(nnx.state(twin))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    n_img = cfg.image_tokens
    assert n_img == (4 if strategy == "default" else 5)
    ids, mask, pixels = _inputs(n_img)
    ref32 = _reference(model, ids, mask, pixels)
    ref64 = _reference(copy.deepcopy(model).double(), ids, mask, pixels)
    got = np.asarray(llava.hidden_states(enc, ids, mask, pixels))
    assert got.shape == ref64.shape == (3, 2, ids.shape[1], 32)
    m = mask[None, :, :, None].astype(np.float64)  # a padding row's value is a convention: compared where valid
    own = fp32_error(lambda w, p: np.asarray(llava.hidden_states(llava.load_llava(cfg, w), ids, mask, p)) * m,
                     in_memory, pixels, base=got * m)
    assert _err(ref32, ref64, mask) < 1e-3
    assert_fp32_parity(f"llava {strategy} layer {layer}", got * m, ref32 * m, ref64 * m, vidax_err=own, factor=FACTOR)
    # the image matters: other pixels change the hidden states at and after the image tokens
    other = np.asarray(llava.hidden_states(enc, ids, mask, pixels[::-1].copy()))
    assert np.abs(other - got)[-1, :, 4:].max() > 1e-2


def test_llava_image_token_count_is_checked(tmp_path):
    model, config, tensors = _build(-2, "default", tmp_path)
    cfg = llava.LlavaConfig.from_config(config)
    enc = llava.load_llava(cfg, tensors)
    ids, mask, pixels = _inputs(3)
    with pytest.raises(UserError, match="image tokens"):
        llava.hidden_states(enc, ids, mask, pixels)
    # text only: no image tokens, no pixels -> the plain language model
    ids2 = np.where(ids == IMAGE_TOKEN, 7, ids)
    got = np.asarray(llava.hidden_states(enc, ids2, mask))
    with torch.no_grad():
        ref = model(input_ids=torch.from_numpy(ids2), attention_mask=torch.from_numpy(mask),
                    output_hidden_states=True).hidden_states
    np.testing.assert_allclose(got[-1] * mask[..., None], ref[-1].numpy() * mask[..., None], atol=1e-4, rtol=0)


def test_full_size_llava_llama3_8b_keys_and_shapes():
    """llava-llama-3-8b's architecture (Llama-3-8B text model, CLIP-L/14-336 vision tower, gelu projector), built
    by transformers on the meta device: every key and shape is what vidax's tables expect from the abstract model."""
    from flax import nnx as _nnx

    from vidax_core.nn.state import abstract_model

    text = dict(model_type="llama", vocab_size=128320, hidden_size=4096, intermediate_size=14336,
                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-5,
                max_position_embeddings=8192, rope_theta=500000.0)
    vision = dict(model_type="clip_vision_model", hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                  num_attention_heads=16, image_size=336, patch_size=14, hidden_act="quick_gelu", projection_dim=768)
    config = dict(model_type="llava", text_config=text, vision_config=vision, image_token_index=128257,
                  vision_feature_layer=-2, vision_feature_select_strategy="default", projector_hidden_act="gelu")
    with torch.device("meta"):
        ref = transformers.LlavaForConditionalGeneration(transformers.LlavaConfig(**config))
    zero = np.zeros((), np.float32)
    shapes = {k: np.broadcast_to(zero, tuple(v.shape)) for k, v in ref.state_dict().items()}
    cfg = llava.LlavaConfig.from_config(config)
    assert cfg.image_tokens == 576
    _, _, flat = abstract_model(lambda: llava.LlavaEncoder(cfg, rngs=_nnx.Rngs(0)))
    llava.convert_llava(cfg, shapes, flat, check_only=True)
    n = sum(int(np.prod(v.shape)) for v in flat.values())
    print(f"llava-llama-3-8b: {n / 1e9:.3f}B params in vidax's tree")
