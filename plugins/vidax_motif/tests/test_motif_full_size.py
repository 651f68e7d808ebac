"""Full-size architecture check without weights: Motif-Video 2B's published DiT (tests/motif_published.py), its
T5Gemma2 text encoder and SigLIP image tower are built by the PyTorch reference on the meta device; their key ->
shape lists must be exactly what vidax's tables expect from the ``eval_shape`` trees of the full-size vidax models,
with the card's parameter count ("2B"). The published config folder plans: its checks pass and it sizes the grid."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from motif_published import DIT, MODEL_ID, TEXT_ENCODER, write_folder  # noqa: E402
from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("motif_full_size")


def test_every_registered_model_is_covered():
    assert registered_models("motif") == {MODEL_ID}


def test_full_size_dit():
    from diffusers import MotifVideoTransformer3DModel

    from vidax_motif.convert_dit import convert_dit
    from vidax_motif.dit import MotifDiT, MotifDiTConfig

    cfg = MotifDiTConfig.from_config(DIT)
    size = check_full_size(lambda: MotifVideoTransformer3DModel(**DIT),
                           lambda t, flat: convert_dit(cfg, t, flat, check_only=True),
                           lambda: MotifDiT(cfg, rngs=nnx.Rngs(0)), label=MODEL_ID, params=(2.0e9, 2.1e9))
    assert size.flat[("decoder_blocks", "attn", "to_q", "kernel")].shape == (8, 1536, 1536)
    assert size.flat[("single_blocks", "cross_attn", "to_k", "kernel")].shape == (16, 1536, 1536)


def test_full_size_text_and_image_encoders():
    from transformers import T5Gemma2Encoder, T5Gemma2EncoderConfig

    from vidax_core.encoders import decoder_llm as dl
    from vidax_core.encoders import t5gemma2
    from vidax_core.encoders.vit import ViTConfig, ViTEncoder, vit_rules

    hf = T5Gemma2EncoderConfig.from_dict(TEXT_ENCODER)
    cfg = t5gemma2.text_config(TEXT_ENCODER)
    others = (r"(?:vision_tower|multi_modal_projector)\..*",)
    check_full_size(lambda: T5Gemma2Encoder(hf),
                    lambda t, flat: dl.convert_params(cfg, t5gemma2.text_tensors(t), flat, component="text_encoder",
                                                      check_only=True),
                    lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)), component="text_encoder", ignore=others,
                    params=(3.8e9, 4.0e9))
    vcfg = ViTConfig.siglip_vision(TEXT_ENCODER["vision_config"])
    check_full_size(lambda: T5Gemma2Encoder(hf).vision_tower,
                    vit_rules(vcfg), lambda: ViTEncoder(vcfg, rngs=nnx.Rngs(0)), component="text_encoder (SigLIP)",
                    params=(0.40e9, 0.43e9))
    assert cfg.hidden_size == DIT["text_embed_dim"] and vcfg.hidden_size == DIT["image_embed_dim"]


def test_published_folder_plans(tmp_path):
    from vidax_core import Checkpoint
    from vidax_core.plugins import Plugins
    from vidax_core.testing.checks import resolve
    from vidax_motif.plugin import MotifPlugin

    plugin = MotifPlugin()

    p = Plugins()
    p.add(plugin, "motif", "vidax-motif", "0.1.0")
    ckpt = Checkpoint(write_folder(str(tmp_path)))
    spec = p.registry.get(MODEL_ID)
    for extra in ([], ["image=x.png"]):
        run = resolve(p, [f"model.id={MODEL_ID}", *extra])
        assert p.call("check_checkpoint", spec, ckpt=ckpt, run=run) == []
    assert p.call("vae_latent_shape", spec, ckpt=ckpt, run=run) == (31, 92, 160)
