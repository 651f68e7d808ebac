"""Full-size architecture check without weights: the published CogVideoX DiT configs of all five repos and the T5
v1.1 XXL encoder are built by the PyTorch reference on the meta device and their key -> shape lists must be exactly
what vidax's tables expect from the ``eval_shape`` tree of the full-size vidax model."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

from flax import nnx  # noqa: E402

from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from published import DITS, T5_V1_1_XXL  # noqa: E402

pytestmark = pytest.mark.xdist_group("cogvideox_full_size")

# DiT parameters of each published model (what diffusers builds from the same config).
SIZES = {"cogvideox-2b": (1.6e9, 1.8e9), "cogvideox-5b": (5.4e9, 5.8e9), "cogvideox-5b-i2v": (5.4e9, 5.8e9),
         "cogvideox1.5-5b": (5.4e9, 5.8e9), "cogvideox1.5-5b-i2v": (5.4e9, 5.8e9)}


def test_every_registered_cogvideox_model_is_covered():
    assert registered_models("cogvideox") == set(DITS)


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    from diffusers import CogVideoXTransformer3DModel

    from vidax_cogvideox.convert_dit import DIT_RULES
    from vidax_cogvideox.dit import CogVideoXDiT, CogVideoXDiTConfig

    cfg = DITS[model_id]
    check_full_size(lambda: CogVideoXTransformer3DModel.from_config(cfg), DIT_RULES,
                    lambda: CogVideoXDiT(CogVideoXDiTConfig.from_config(cfg), rngs=nnx.Rngs(0)), label=model_id,
                    params=SIZES[model_id])


def test_full_size_t5_v1_1_xxl():
    from transformers import T5Config as HFConfig, T5EncoderModel

    from vidax_core.encoders.t5 import T5Config, T5Encoder, t5_rules

    hf = HFConfig(**{k: v for k, v in T5_V1_1_XXL.items() if k != "architectures"})
    cfg = T5Config.from_config(T5_V1_1_XXL)
    check_full_size(lambda: T5EncoderModel(hf), t5_rules(cfg), lambda: T5Encoder(cfg, rngs=nnx.Rngs(0)),
                    component="text_encoder")
