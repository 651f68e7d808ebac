"""Full-size architecture check without weights: the published Helios transformer configuration (Helios-Base,
-Mid and -Distilled share it) built by the PyTorch reference on the meta device, and vidax's key table must fill the
full-size ``eval_shape`` tree exactly, with as many parameters."""

from __future__ import annotations

import pytest
from flax import nnx

from vidax_core.testing.reference import check_full_size, registered_models

pytest.importorskip("torch")

# BestWishYsh/Helios-Base's transformer config: diffusers' HeliosTransformer3DModel defaults (Wan2.1-14B widths,
# the 3-scale memory patches, history timestep 0, chunk-only cross-attention; the stage-1 recipe's history keys
# are not amplified).
DIT = dict(patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16, out_channels=16,
           text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
           qk_norm="rms_norm_across_heads", eps=1e-6, rope_dim=(44, 42, 42), rope_theta=10000.0,
           guidance_cross_attn=True, zero_history_timestep=True, has_multi_term_memory_patch=True,
           is_amplify_history=False, history_scale_mode="per_head")
DITS = {"helios-base": DIT, "helios-mid": DIT, "helios-distilled": DIT}  # one architecture, three trainings


def test_every_registered_helios_model_is_covered():
    ids = registered_models("helios")
    assert ids <= set(DITS), f"add the published config of {sorted(ids - set(DITS))} here"


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    from diffusers import HeliosTransformer3DModel

    from vidax_helios.convert_dit import DIT_RULES
    from vidax_helios.dit import HeliosDiT, HeliosDiTConfig

    cfg = DITS[model_id]
    check_full_size(lambda: HeliosTransformer3DModel(**cfg), DIT_RULES,
                    lambda: HeliosDiT(HeliosDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id,
                    params=(1.3e10, 1.6e10))


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_the_scheduler_config_reads(model_id):
    """Each id's scheduler config (vidax_helios.presets.SCHEDULERS: one stage of UniPC for HeliosPipeline, three
    stages of UniPC or DMD for the pyramid) is what diffusers' class keeps and what vidax reads."""
    import diffusers

    from vidax_core.schedulers.base import sampler_from_scheduler_config
    from vidax_helios.presets import SCHEDULERS

    cfg = SCHEDULERS[model_id]
    ref = getattr(diffusers, cfg["_class_name"])(**{k: v for k, v in cfg.items() if k != "_class_name"})
    assert {k: ref.config[k] for k in cfg if k != "_class_name"} == {k: v for k, v in cfg.items() if k != "_class_name"}
    sampler = sampler_from_scheduler_config(cfg)
    if model_id == "helios-base":
        assert sampler.name == "unipc" and sampler.use_dynamic_shifting and not sampler.integer_timesteps
    else:
        assert sampler.name == "helios_pyramid" and sampler.stages == 3
        assert sampler.kind == ("dmd" if model_id == "helios-distilled" else "unipc")
