"""The ViT base against transformers on tiny configs of every configuration the families need: CLIP vision,
CLIP text (pooled at EOS, both eos conventions, with and without projection, with a padding mask), SigLIP vision
(attention-pooling head) and SigLIP text. fp32 tolerances come from the reference's own fp32-vs-fp64 error; bf16
runs of vidax are held to the reference's own bf16-vs-fp32 error."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from flax import nnx

from vidax_core.encoders.vit import ViTConfig, load_vit
from vidax_core.io.convert import ConversionError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

T = transformers
TOWER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4)
VISION = dict(image_size=28, patch_size=7)
TEXT = dict(vocab_size=50, max_position_embeddings=16)
B, L = 2, 12

# name -> (transformers model class, config class, config kwargs, ViTConfig builder, output field of the pooled)
VARIANTS = {
    "clip_vision": ("CLIPVisionModel", "CLIPVisionConfig", dict(**TOWER, **VISION, hidden_act="gelu"),
                    ViTConfig.clip_vision, "pooler_output"),
    "clip_text": ("CLIPTextModel", "CLIPTextConfig", dict(**TOWER, **TEXT, eos_token_id=49, pad_token_id=1,
                                                         bos_token_id=0),
                  ViTConfig.clip_text, "pooler_output"),
    "clip_text_proj_legacy_eos": ("CLIPTextModelWithProjection", "CLIPTextConfig",
                                  dict(**TOWER, **TEXT, eos_token_id=2, pad_token_id=1, bos_token_id=0,
                                       projection_dim=24),
                                  lambda c, **o: ViTConfig.clip_text(c, with_projection=True, **o), "text_embeds"),
    "siglip_vision": ("SiglipVisionModel", "SiglipVisionConfig", dict(**TOWER, **VISION),
                      ViTConfig.siglip_vision, "pooler_output"),
    "siglip_text": ("SiglipTextModel", "SiglipTextConfig", dict(**TOWER, **TEXT, projection_size=24),
                    ViTConfig.siglip_text, "pooler_output"),
}


def _inputs(name):
    """(torch kwargs, vidax positional input, vidax attention mask or None)."""
    rng = np.random.default_rng(0)
    if "vision" in name:
        px = rng.standard_normal((B, 3, 28, 28)).astype(np.float32)
        return {"pixel_values": px}, px, None
    ids = rng.integers(3, 48, (B, L)).astype(np.int64)
    if name.startswith("clip_text"):
        eos = 49 if name == "clip_text" else 48  # legacy eos_token_id == 2: the pooled token is the arg-max id
        ids[:, 0] = 0
        ids[0, 5], ids[1, 9] = eos, eos
        mask = np.ones((B, L), np.int64)
        mask[0, 6:], mask[1, 10:] = 0, 0
        ids[0, 6:], ids[1, 10:] = 1, 1
        return {"input_ids": ids, "attention_mask": mask}, ids, mask
    return {"input_ids": ids}, ids, None


def _build(name):
    model_cls, cfg_cls, kw, _, _ = VARIANTS[name]
    cfg = getattr(T, cfg_cls)(**kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(T, model_cls)(cfg).eval().float()
    with torch.no_grad():  # every parameter random, biases and LayerNorm affines included
        for pname, p in model.named_parameters():
            if "norm" in pname and pname.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif pname.endswith("bias") or "norm" in pname:
                p.copy_(0.1 * torch.randn_like(p))
            elif p.ndim > 1:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 if "embedding" not in pname else torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p))
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return cfg.to_dict(), model, sd


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _run_torch(name, model, kwargs, dtype):
    m = copy.deepcopy(model).to(dtype)
    t = {k: torch.from_numpy(v).to(dtype) if v.dtype == np.float32 else torch.from_numpy(v) for k, v in kwargs.items()}
    with torch.no_grad():
        out = m(**t, output_hidden_states=True)
    pooled = getattr(out, VARIANTS[name][4])
    return (out.last_hidden_state.double().numpy(), pooled.double().numpy(), out.hidden_states[-2].double().numpy())


def _vidax(name, cfg_dict, sd, inp, mask, **overrides):
    """(last_hidden_state, pooled, hidden_states[-2]) of the vidax tower, one jit."""
    enc = load_vit(VARIANTS[name][3](cfg_dict, **overrides), sd)
    graphdef, state = nnx.split(enc)

    def fwd(st, x, m):
        e = nnx.merge(graphdef, st)
        return (*e(x, m), e.hidden_state(x, -2, m))

    m = None if mask is None else jnp.asarray(mask)
    return tuple(np.asarray(a) for a in jax.jit(fwd)(state, jnp.asarray(inp), m))


@pytest.fixture(scope="module", params=list(VARIANTS))
def run(request):
    """Every output of one variant: transformers fp64 / fp32 / bf16 and vidax fp32 / bf16 on the same inputs."""
    name = request.param
    cfg_dict, model, sd = _build(name)
    kwargs, inp, mask = _inputs(name)
    out = {f"torch_{k}": _run_torch(name, model, kwargs, dt)
           for k, dt in (("64", torch.float64), ("32", torch.float32), ("16", torch.bfloat16))}
    out["vidax_32"] = _vidax(name, cfg_dict, sd, inp, mask)
    out["vidax_16"] = _vidax(name, cfg_dict, sd, inp, mask, dtype=jnp.bfloat16)
    return name, out


def test_matches_transformers_fp32(run):
    name, out = run
    for i, what in enumerate(("last_hidden_state", "pooled", "hidden_states[-2]")):
        g, w64, w32 = out["vidax_32"][i], out["torch_64"][i], out["torch_32"][i]
        assert g.dtype == np.float32 and g.shape == w64.shape, (what, g.shape, w64.shape)
        ref_err = np.abs(w32 - w64).max()
        err = np.abs(g - w64).max()
        print(f"{name} {what}: vidax-vs-fp64 max abs {err:.3e} (rel {_rel(g, w64):.3e}); "
              f"transformers fp32-vs-fp64 {ref_err:.3e}")
        assert err <= 8 * max(ref_err, np.finfo(np.float32).eps * np.abs(w64).max()), what


def test_bf16_within_reference_bf16_error(run):
    name, out = run
    for i, what in enumerate(("last_hidden_state", "pooled")):
        g16, g32, r16, r32 = out["vidax_16"][i], out["vidax_32"][i], out["torch_16"][i], out["torch_32"][i]
        assert g16.dtype == np.float32
        rel, ref_rel = _rel(g16, g32), _rel(r16, r32)
        print(f"{name} bf16 {what}: vidax bf16-vs-fp32 rel {rel:.3e}; transformers bf16-vs-fp32 rel {ref_rel:.3e}")
        assert 0 < rel <= 2 * ref_rel, what


def test_eos_pooling_picks_the_eos_row():
    """CLIP text pools the first eos_token_id position, not the last token (a property, independent of torch)."""
    name = "clip_text"
    cfg_dict, _, sd = _build(name)
    _, ids, mask = _inputs(name)
    enc = load_vit(ViTConfig.clip_text(cfg_dict), sd)
    last, pooled = enc(jnp.asarray(ids), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(pooled), np.asarray(last)[[0, 1], [5, 9]])


def test_config_builders_and_conversion_errors():
    cfg_dict, _, sd = _build("siglip_vision")
    cfg = ViTConfig.siglip_vision(cfg_dict)
    assert (cfg.class_token, cfg.patch_bias, cfg.pooling, cfg.num_positions) == (False, True, "map", 16)
    assert ViTConfig.siglip_vision({**cfg_dict, "vision_use_head": False}).pooling is None
    full = ViTConfig.clip_text({"text_config": dict(TOWER), "projection_dim": 24}, with_projection=True)
    assert full.projection_dim == 24 and full.causal and full.pooling == "eos"
    with pytest.raises(ValueError):
        ViTConfig(hidden_act="mystery")
    broken = dict(sd)
    del broken["head.mlp.fc1.bias"]
    broken["extra"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as err:
        load_vit(cfg, broken)
    assert err.value.missing == ["head/mlp/fc1/bias"] and err.value.unexpected == ["extra"]
    # a two-tower checkpoint: the other tower's keys are known and dropped
    two = {**{"vision_model." + k: v for k, v in sd.items()}, "text_model.embeddings.token_embedding.weight":
           np.zeros((3, 32), np.float32), "logit_scale": np.zeros((), np.float32)}
    load_vit(cfg, two)
