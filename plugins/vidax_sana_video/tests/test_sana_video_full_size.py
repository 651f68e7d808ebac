"""Full-size architecture check without weights for every SANA-Video id: the published transformer config
(tests/sana_published.py) built by diffusers' ``SanaVideoTransformer3DModel`` on the meta device gives key -> shape;
vidax's key table must fill the ``eval_shape`` tree of the full-size vidax DiT exactly, with the model card's 2B
parameters; Gemma-2-2B (transformers' ``Gemma2Model``, meta device) likewise for the core's decoder LLM. The
published config folders parse as the plugin reads them and plan the reference size (832x480, 81 frames: 32,760
tokens, which sp = 8 divides: the linear attention asks nothing of the 20 heads); every registered id is covered."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from sana_published import GEMMA2_2B, MODELS  # noqa: E402
from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("sana_video_full_size")


def test_every_registered_model_is_covered():
    assert registered_models("sana-video") == set(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_size_dit(name):
    from diffusers import SanaVideoTransformer3DModel

    from vidax_sana_video.convert_dit import DIT_RULES
    from vidax_sana_video.dit import SanaVideoDiT, SanaVideoDiTConfig

    dit = MODELS[name]
    cfg = SanaVideoDiTConfig.from_config(dit)
    size = check_full_size(lambda: SanaVideoTransformer3DModel(**dit), DIT_RULES,
                           lambda: SanaVideoDiT(cfg, rngs=nnx.Rngs(0)), label=name, params=(1.9e9, 2.2e9))
    assert size.flat[("blocks", "ff", "conv_inverted")].shape == (20, 2240, 2, 3 * 2240)


def test_full_size_gemma2_text_encoder():
    from transformers import Gemma2Config, Gemma2Model

    from vidax_core.encoders import decoder_llm as dl

    cfg = dl.DecoderLLMConfig.from_config({**GEMMA2_2B, "model_type": "gemma2"})
    assert cfg.attn_logit_softcapping == 50.0 and cfg.layer_types[:2] == (dl.SLIDING, dl.FULL)

    def fill(tensors, flat):
        dl.convert_params(cfg, tensors, flat, component="text_encoder", check_only=True)

    check_full_size(lambda: Gemma2Model(Gemma2Config(**GEMMA2_2B)), fill,
                    lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)), component="text_encoder", label="Gemma-2-2B",
                    params=(2.5e9, 2.7e9))


def test_published_folders_plan(tmp_path):
    """The written folders' configs pass the plugin's checks at the preset size (binning on), size the latent grid,
    and the dry run's plan runs sp = 8 over 20 heads."""
    from types import SimpleNamespace

    from sana_published import write_folders

    from vidax_core import Checkpoint
    from vidax_core.attention.kinds import exchanges_heads
    from vidax_core.parallel.mesh import plan_mesh
    from vidax_core.runner.plan import video_tokens
    from vidax_core.plugins import Plugins
    from vidax_core.testing.checks import resolve
    from vidax_sana_video.plugin import SanaVideoPlugin

    plugin = SanaVideoPlugin()

    p = Plugins()
    p.add(plugin, "sana_video", "vidax-sana-video", "0.1.0")
    for root in write_folders(str(tmp_path)):
        model_id = root.rsplit("/", 1)[-1]
        spec = p.registry.get(model_id)
        run = resolve(p, [f"model.id={model_id}", f"model.checkpoint={root}"])
        ckpt = Checkpoint(root)
        assert p.call("check_checkpoint", spec, ckpt=ckpt, run=run) == []
        assert p.call("vae_latent_shape", spec, ckpt=ckpt, run=run) == (21, 60, 104)
        build = p.call("build_dit", spec, ckpt=ckpt, run=run)
        assert build.attention_kinds == ("linear", "cross") and build.heads == 20
        tokens = video_tokens(build, (21, 60, 104))
        sp8 = plan_mesh(SimpleNamespace(dp=1, tp=1, sp=8), n_devices=8, heads=build.heads, video_tokens=tokens,
                        batch=2, sp_splits_heads=exchanges_heads(build.attention_kinds))
        assert tokens == 32760 and sp8.sp == 8
