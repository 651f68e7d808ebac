"""Full-size architecture check without weights: every AnyFlow id's published transformer configuration is built by
the PyTorch reference on the meta device and vidax's key table must fill the full-size ``eval_shape`` tree exactly,
with as many parameters (the Wan VAE and UMT5 full-size checks are the Wan family's)."""

from __future__ import annotations

import pytest
from flax import nnx

from vidax_core.testing.reference import check_full_size, registered_models

pytest.importorskip("torch")

# The transformer configs of the nvidia/AnyFlow-*-Diffusers repositories: Wan2.1-1.3B / 14B widths, the flow-map
# delta embedder; FAR adds its compressed patch embedding, three recent full-resolution chunks and the released
# 81-frame chunk partition.
COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, text_dim=4096, freq_dim=256, cross_attn_norm=True,
              eps=1e-6, rope_max_seq_len=1024, in_channels=16, out_channels=16, gate_value=0.25, deltatime_type="r")
S13B = dict(num_attention_heads=12, ffn_dim=8960, num_layers=30)
S14B = dict(num_attention_heads=40, ffn_dim=13824, num_layers=40)
FAR = dict(compressed_patch_size=(1, 4, 4), full_chunk_limit=3, chunk_partition=(1, 3, 3, 3, 3, 3, 3, 2))
DITS = {
    "anyflow-far-wan2.1-1.3b": dict(COMMON, **S13B, **FAR),
    "anyflow-far-wan2.1-14b": dict(COMMON, **S14B, **FAR),
    "anyflow-wan2.1-t2v-1.3b": dict(COMMON, **S13B),
    "anyflow-wan2.1-t2v-14b": dict(COMMON, **S14B),
}
CLASSES = {mid: "AnyFlowFARTransformer3DModel" if "far" in mid else "AnyFlowTransformer3DModel" for mid in DITS}
BOUNDS = {"1.3b": (1.3e9, 1.6e9), "14b": (1.3e10, 1.5e10)}  # published: 1.3B and 14B
SCHEDULER_SHIFT = 5.0  # the config-only folders' flow-map shift (it shapes no tensor)


def test_every_registered_anyflow_model_is_covered():
    ids = registered_models("anyflow")
    assert ids <= set(DITS), f"add the published config of {sorted(ids - set(DITS))} here"


@pytest.mark.parametrize("model_id", sorted(DITS))
def test_full_size_dit(model_id):
    import diffusers

    from vidax_anyflow.convert_dit import DIT_RULES
    from vidax_anyflow.dit import AnyFlowDiT, AnyFlowDiTConfig

    cfg = DITS[model_id]
    ref = getattr(diffusers, CLASSES[model_id])
    check_full_size(lambda: ref(**cfg), DIT_RULES,
                    lambda: AnyFlowDiT(AnyFlowDiTConfig.from_config(cfg, far="far" in model_id), rngs=nnx.Rngs(0)),
                    label=model_id, params=BOUNDS[model_id.rsplit("-", 1)[1]])
