"""Full-size architecture check without weights: the published Cosmos3 Nano and Edge transformer configurations are
built by the PyTorch reference (diffusers ``Cosmos3OmniTransformer``) on the meta device; their key -> shape list
must be exactly what vidax's table expects from the ``eval_shape`` tree of the full-size vidax model, apart from the
keys the video DiT drops on purpose (``convert_cosmos3.IGNORED``: LM head, text final norm, sound/action heads).

Where the numbers come from: NANO is diffusers' ``Cosmos3OmniTransformer`` defaults (which are nvidia/Cosmos3-Nano's)
plus the sound/action heads the Nano checkpoint config declares (sound_dim 64, max_action_dim 64, as quoted from
its config in public Cosmos3 tooling). EDGE is nvidia/Cosmos3-Edge's ``transformer/config.json`` as quoted in
public Cosmos3 serving tests (hidden 2048, 28 layers, 16/8 heads, head_dim 128, intermediate 9216, relu2,
``qk_norm_for_text: false``, ``use_und_k_norm_for_gen: true``, rope_theta 1e8, eps 1e-5, vocab 131072). Both are
second-hand copies of the hub files, which are not reachable from here.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from vidax_core.testing.reference import check_full_size  # noqa: E402

pytestmark = pytest.mark.xdist_group("cosmos3_full_size")

_SHARED = dict(attention_bias=False, head_dim=128, base_fps=24, enable_fps_modulation=True, latent_channel=48,
               latent_patch_size=2, patch_latent_dim=192, unified_3d_mrope_reset_spatial_ids=True,
               unified_3d_mrope_temporal_modality_margin=15000, rope_scaling={"mrope_section": [24, 20, 20]},
               timestep_scale=0.001, num_embodiment_domains=32, action_gen=True, action_dim=64)
CONFIGS = {
    "cosmos3-nano": dict(_SHARED, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                         num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-6, rope_theta=5000000.0,
                         vocab_size=151936, hidden_act="silu", qk_norm_for_text=True, use_und_k_norm_for_gen=False,
                         sound_gen=True, sound_dim=64, sound_latent_fps=25.0),
    "cosmos3-edge": dict(_SHARED, hidden_size=2048, intermediate_size=9216, num_hidden_layers=28,
                         num_attention_heads=16, num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=100000000.0,
                         vocab_size=131072, hidden_act="relu2", qk_norm_for_text=False, use_und_k_norm_for_gen=True,
                         sound_gen=False, sound_dim=None),
}


@pytest.mark.parametrize("model_id", sorted(CONFIGS))
def test_full_size_dit(model_id):
    from diffusers import Cosmos3OmniTransformer

    from vidax_cosmos.convert_cosmos3 import IGNORED, dit_rules
    from vidax_cosmos.cosmos3_dit import Cosmos3DiT, Cosmos3DiTConfig

    cfg_dict = CONFIGS[model_id]
    cfg = Cosmos3DiTConfig.from_config(cfg_dict)
    size = check_full_size(lambda: Cosmos3OmniTransformer(**cfg_dict), dit_rules(cfg),
                           lambda: Cosmos3DiT(cfg, rngs=nnx.Rngs(0)), ignore=IGNORED, label=model_id)
    dropped, n_vidax = size.dropped, size.vidax_params
    # what is dropped: the LM head, the text stream's final norm and the sound/action heads, nothing else
    assert "lm_head.weight" in dropped and "norm.weight" in dropped
    assert all(k in ("lm_head.weight", "norm.weight") or k.startswith(("audio_", "action_")) for k in dropped)
    print(f"{model_id}: {len(dropped)} keys dropped")
    if model_id == "cosmos3-nano":
        assert cfg.num_attention_heads == 32 and cfg.num_key_value_heads == 8 and cfg.hidden_act == "silu"
        assert 14.0e9 < n_vidax < 15.0e9  # two 36-layer 4096-wide towers (13.9B) + the 151936-token embedding
    else:
        assert cfg.has_k_norm_und_for_gen and cfg.nemotron_norms and cfg.q_dim == cfg.hidden_size
        assert 2.9e9 < n_vidax < 3.3e9  # two 28-layer 2048-wide towers (2.8B) + the 131072-token embedding
