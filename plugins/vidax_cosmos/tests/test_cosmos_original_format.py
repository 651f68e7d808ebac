"""The original Cosmos-Predict2.5 DiT layout (``net.*`` keys in a torch.save file, training-only entries, a
TransformerEngine ``_extra_state`` object) and the release's ``tokenizer.pth`` (the Wan2.1 VAE under its original
key names) load, pickle-free, to exactly the parameters of their diffusers twins."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.checkpoint import Checkpoint  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_cosmos.plugin import CosmosPlugin  # noqa: E402
from vidax_cosmos.original_format import RENAMES, OriginalCosmosCheckpoint, diffusers_key, open_original  # noqa: E402
from vidax_cosmos.tiny import save_tiny_cosmos  # noqa: E402
from vidax_core.testing.tiny.wan_original_keys import vae_inverse  # noqa: E402

plugin = CosmosPlugin()

pytestmark = pytest.mark.xdist_group("cosmos_original")


def original_key(key: str) -> str:
    """diffusers name -> the release's name (the conversion's replacements undone in reverse order)."""
    for old, new in reversed(RENAMES):
        key = key.replace(new, old)
    return "net." + key


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from safetensors.torch import load_file

    root = tmp_path_factory.mktemp("cosmos_orig")
    torch.manual_seed(0)
    diffusers_dir = save_tiny_cosmos(root / "diffusers", seed=5, dit={"rope_scale": (1.0, 3.0, 3.0)})
    sd = load_file(str(diffusers_dir / "transformer" / "diffusion_pytorch_model.safetensors"))
    original = {}
    for k, v in sd.items():
        ok = original_key(k)
        assert diffusers_key(ok) == k, (k, ok)
        original[ok] = v
    original.update({
        "net.accum_iteration": torch.tensor(1234),
        "net.accum_video_sample_counter": torch.tensor(5),
        "net.pos_embedder.seq": torch.arange(16.0),
        "net.pos_embedder.dim_spatial_range": torch.arange(4.0),
        "net.logvar.0.freqs": torch.randn(8),
        "net.blocks.0.self_attn.q_proj._extra_state": io.BytesIO(b"te fp8 meta"),
        "net.blocks.1.mlp.layer1._extra_state": torch.zeros(0, dtype=torch.uint8),
    })
    orig_dir = root / "original"
    orig_dir.mkdir()
    torch.save({"model": original}, str(orig_dir / "d20b7120_ema_bf16.pt"))
    vae_cfg = json.loads((diffusers_dir / "vae" / "config.json").read_text())
    vae_sd = load_file(str(diffusers_dir / "vae" / "diffusion_pytorch_model.safetensors"))
    torch.save({vae_inverse(k, vae_cfg["num_res_blocks"], False): v for k, v in vae_sd.items()},
               str(orig_dir / "tokenizer.pth"))
    for c in ("text_encoder", "tokenizer"):
        os.symlink(diffusers_dir / c, orig_dir / c)
    return diffusers_dir, orig_dir


def _converted(ckpt):
    from types import SimpleNamespace

    run = SimpleNamespace(model=SimpleNamespace(dtype="float32"))
    build = plugin.build_dit(None, ckpt, run)
    _, _, flat = abstract_model(build.ctor)
    return build.config, plugin.convert_checkpoint(None, "transformer", ckpt.tensors("transformer"), flat,
                                                     ckpt.config("transformer"))


def test_original_loads_to_the_diffusers_params(folders):
    diffusers_dir, orig_dir = folders
    ckpt = open_original(None, str(orig_dir))
    assert isinstance(ckpt, OriginalCosmosCheckpoint)
    cfg_o, got = _converted(ckpt)
    cfg_d, want = _converted(Checkpoint(str(diffusers_dir)))
    assert cfg_o == cfg_d
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=str(k))
    from vidax_core.schedulers.base import sampler_from_scheduler_config

    assert (sampler_from_scheduler_config(ckpt.config("scheduler"))
            == sampler_from_scheduler_config(Checkpoint(str(diffusers_dir)).config("scheduler")))
    assert plugin.check_checkpoint(None, ckpt, None) == []


# Every parameter kind of the release, written out by hand from diffusers' conversion script (independent of the
# rename table the loader uses).
RELEASE_NAMES = {
    "net.x_embedder.proj.1.weight": "patch_embed.proj.weight",
    "net.t_embedder.1.linear_1.weight": "time_embed.t_embedder.linear_1.weight",
    "net.t_embedder.1.linear_2.weight": "time_embed.t_embedder.linear_2.weight",
    "net.t_embedding_norm.weight": "time_embed.norm.weight",
    "net.crossattn_proj.0.weight": "crossattn_proj.0.weight",
    "net.crossattn_proj.0.bias": "crossattn_proj.0.bias",
    "net.blocks.7.adaln_modulation_self_attn.1.weight": "transformer_blocks.7.norm1.linear_1.weight",
    "net.blocks.7.adaln_modulation_self_attn.2.weight": "transformer_blocks.7.norm1.linear_2.weight",
    "net.blocks.7.adaln_modulation_cross_attn.1.weight": "transformer_blocks.7.norm2.linear_1.weight",
    "net.blocks.7.adaln_modulation_cross_attn.2.weight": "transformer_blocks.7.norm2.linear_2.weight",
    "net.blocks.7.adaln_modulation_mlp.1.weight": "transformer_blocks.7.norm3.linear_1.weight",
    "net.blocks.7.adaln_modulation_mlp.2.weight": "transformer_blocks.7.norm3.linear_2.weight",
    "net.blocks.7.self_attn.q_proj.weight": "transformer_blocks.7.attn1.to_q.weight",
    "net.blocks.7.self_attn.k_proj.weight": "transformer_blocks.7.attn1.to_k.weight",
    "net.blocks.7.self_attn.v_proj.weight": "transformer_blocks.7.attn1.to_v.weight",
    "net.blocks.7.self_attn.output_proj.weight": "transformer_blocks.7.attn1.to_out.0.weight",
    "net.blocks.7.self_attn.q_norm.weight": "transformer_blocks.7.attn1.norm_q.weight",
    "net.blocks.7.self_attn.k_norm.weight": "transformer_blocks.7.attn1.norm_k.weight",
    "net.blocks.7.cross_attn.k_proj.weight": "transformer_blocks.7.attn2.to_k.weight",
    "net.blocks.7.cross_attn.output_proj.weight": "transformer_blocks.7.attn2.to_out.0.weight",
    "net.blocks.7.cross_attn.q_norm.weight": "transformer_blocks.7.attn2.norm_q.weight",
    "net.blocks.7.mlp.layer1.weight": "transformer_blocks.7.ff.net.0.proj.weight",
    "net.blocks.7.mlp.layer2.weight": "transformer_blocks.7.ff.net.2.weight",
    "net.final_layer.adaln_modulation.1.weight": "norm_out.linear_1.weight",
    "net.final_layer.adaln_modulation.2.weight": "norm_out.linear_2.weight",
    "net.final_layer.linear.weight": "proj_out.weight",
}


def test_release_vae_file_loads_to_the_diffusers_vae(folders):
    """``tokenizer.pth`` stands in for ``vae/``: same config numbers, exactly the same VAE parameters."""
    from vidax_core.nn.state import flat_state
    from vidax_core.vae.wan_video import load_wan_autoencoder

    diffusers_dir, orig_dir = folders
    ckpt, twin = open_original(None, str(orig_dir)), Checkpoint(str(diffusers_dir))
    assert ckpt.has("vae") and not (orig_dir / "vae").exists()
    got_cfg, want_cfg = ckpt.config("vae"), twin.config("vae")
    for key in ("base_dim", "z_dim", "dim_mult", "num_res_blocks", "temperal_downsample"):
        assert got_cfg[key] == want_cfg[key], key
    got = flat_state(load_wan_autoencoder(got_cfg, ckpt.tensors("vae"), with_encoder=True).vae)
    want = flat_state(load_wan_autoencoder(want_cfg, twin.tensors("vae"), with_encoder=True).vae)
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=str(k))


def test_release_names():
    for original, name in RELEASE_NAMES.items():
        assert diffusers_key(original) == name, original


def test_dropped_entries_and_folder_errors(folders, tmp_path):
    assert diffusers_key("net.accum_iteration") is None
    assert diffusers_key("net.blocks.3.cross_attn.k_proj._extra_state") is None
    assert diffusers_key("net.pos_embedder.dim_temporal_range") is None
    assert diffusers_key("net.logvar.1.weight") is None
    assert diffusers_key("net.x_embedder.proj.1.weight") == "patch_embed.proj.weight"
    _, orig_dir = folders
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    os.symlink(orig_dir / "d20b7120_ema_bf16.pt", lonely / "model_ema_bf16.pt")
    ckpt = open_original(None, str(lonely))
    with pytest.raises(UserError, match="vae/ or tokenizer.pth"):
        ckpt.require("vae")
    with pytest.raises(UserError, match="text_encoder/"):
        ckpt.require("text_encoder")
    os.symlink(orig_dir / "d20b7120_ema_bf16.pt", lonely / "other.pt")
    with pytest.raises(UserError, match="2 .pt files"):
        open_original(None, str(lonely))
