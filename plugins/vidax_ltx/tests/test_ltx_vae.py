"""LTX-Video VAE parity against diffusers' AutoencoderKLLTXVideo (torch is a test-only oracle).

Tiny random models, every parameter randomised (norm gains, biases, scale-shift tables, per-channel latent
statistics), saved with ``save_pretrained`` and read back with vidax's safetensors reader. Each comparison passes
when vidax is within 4x the reference's own fp32 error, both measured against the float64 reference on the same
inputs (``vidax_core.testing.tiny.wan_vae_parity.check``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.devices import xla_flags

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.errors import UserError  # noqa: E402
from vidax_ltx import vae as vae_lib  # noqa: E402
from vidax_core.testing.parity import fp32_error  # noqa: E402
from vidax_core.testing.tiny.ltx_vae_parity import (  # noqa: E402
    RAGGED, RAGGED_LATENT, assert_same_params, check_encode, check_ragged, decode_ref as _decode_ref,
    latents as _latents, ragged_runs, random_reference, saved)
from vidax_core.testing.tiny.wan_vae_parity import check, errors, tiles  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_vae")
diffusers.utils.logging.set_verbosity_error()  # its dtype-cast notice on every .to(float64)

#: 0.9.8 layout at tiny widths: 0.9.5 down blocks (spatial, temporal, spatiotemporal x2), residual upsamplers that
#: halve the width, a timestep-conditioned non-causal decoder; still 32x spatial and 8x temporal compression.
TINY = dict(
    latent_channels=8, block_out_channels=(8, 16, 16, 32, 32), decoder_block_out_channels=(16, 32, 64),
    layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
    spatio_temporal_scaling=(True, True, True, True), decoder_spatio_temporal_scaling=(True, True, True),
    decoder_inject_noise=(False, False, False, False), down_block_types=("LTXVideo095DownBlock3D",) * 4,
    downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    upsample_residual=(True, True, True), upsample_factor=(2, 2, 2), timestep_conditioning=True, patch_size=4,
    patch_size_t=1, encoder_causal=True, decoder_causal=False, spatial_compression_ratio=32,
    temporal_compression_ratio=8,
)
#: Another decoder: no timestep conditioning, plain upsamplers, width changes through a conv_in resnet (LayerNorm
#: + 1x1 shortcut), causal padding.
PLAIN_DECODER = dict(TINY, timestep_conditioning=False, upsample_residual=(False, False, False),
                     upsample_factor=(1, 1, 1), decoder_block_out_channels=(8, 16, 32), decoder_causal=True)

DECODE_T = 0.05
TILES = tiles(64, 64, 32, 32)  # latent tiles of 2 x 2 at stride 1: every tile overlaps its neighbours
ROW_TILES = tiles(64, 64, 64, 32)  # one row of 64 px tiles overlapping by 32 px (fewer tile shapes to compile)


def _reference(config: dict, seed: int):
    return random_reference(diffusers.AutoencoderKLLTXVideo, config, seed)


def _saved(model, tmp_path_factory, name: str):
    return saved(model, tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = _reference(TINY, 0)
    config, tensors = _saved(model, tmp_path_factory, "ltx_vae")
    vae = vae_lib.load_vae(vae_lib.LTXVAEConfig.from_config(config), tensors, with_encoder=True)
    return model, vae


def test_config_resolves_compression_and_reads_statistics(tiny):
    model, vae = tiny
    cfg = vae.cfg
    assert (cfg.spatial_compression_ratio, cfg.temporal_compression_ratio) == (32, 8)
    np.testing.assert_array_equal(np.asarray(cfg.latents_mean, np.float32), model.latents_mean.numpy())
    np.testing.assert_array_equal(np.asarray(cfg.latents_std, np.float32), model.latents_std.numpy())
    plain = vae_lib.LTXVAEConfig.from_config({k: v for k, v in TINY.items() if "compression" not in k})
    assert (plain.spatial_compression_ratio, plain.temporal_compression_ratio) == (64, 16)  # patch * 2**4


def test_decode_with_timestep_matches_reference(tiny):
    model, vae = tiny
    z = _latents((2, 8, 3, 2, 3))
    ref32, ref64 = _decode_ref(model, z, [DECODE_T, DECODE_T])
    got = vae_lib.decode(vae, z, timestep=DECODE_T)
    assert got.shape == (2, 3, 17, 64, 96) and got.dtype == np.float32
    own = fp32_error(lambda zz, tt: vae_lib.decode(vae, zz, timestep=float(tt[0])), z,
                     np.array([DECODE_T], np.float32), base=got)
    check("decode t=0.05", got, ref32, ref64, vidax_err=own)


def test_decode_timestep_conditioning_is_exercised(tiny):
    """The parity test above can fail: a decoder run at another timestep is far outside its tolerance, and a
    per-entry timestep batch decodes each entry at its own timestep."""
    model, vae = tiny
    z = _latents((2, 8, 2, 2, 2), seed=1)
    ref32, ref64 = _decode_ref(model, z, [DECODE_T, 0.5])
    floor = errors(ref32, ref64)[0]
    wrong = vae_lib.decode(vae, z[:1], timestep=0.0)  # the per-entry run below reuses this batch-1 program
    assert errors(wrong, ref64[:1])[0] > 1000 * floor
    t = np.array([DECODE_T, 0.5], np.float32)
    got = vae_lib.decode(vae, z, timestep=t)
    # vidax's own fp32 error (latents and timesteps one ulp off) joins the reference's: diffusers embeds the
    # timestep in float32 even in its float64 run, so the reference alone underestimates the rounding there
    own = fp32_error(lambda zz, tt: vae_lib.decode(vae, zz, timestep=tt), z, t, base=got)
    check("decode per-entry t", got, ref32, ref64, vidax_err=own)
    with pytest.raises(UserError, match="timestep-conditioned"):
        vae_lib.decode(vae, z)


def test_decode_tiled_matches_reference(tiny):
    model, vae = tiny
    z = _latents((1, 8, 1, 3, 4), seed=2)
    ref32, ref64 = _decode_ref(model, z, [DECODE_T], TILES)
    got = vae_lib.decode(vae, z, timestep=DECODE_T, tiling=TILES)
    check("decode tiled", got, ref32, ref64)
    assert vae_lib.decode_plan(vae.cfg, z.shape[3:], TILES).num_tiles == 12  # overlapping tiles, not one decode


@pytest.fixture(scope="module")
def ragged(tiny):
    """The ragged 2 x 2 grid (zero-padded convs, timestep-conditioned decoder) decoded and encoded padded and per
    tile shape (``ragged_runs``)."""
    _, vae = tiny
    z = _latents((1, 8, 2, *RAGGED_LATENT), seed=7)
    x = np.random.default_rng(8).uniform(-1, 1, (1, 3, 9, 160, 160)).astype(np.float32)
    return z, x, ragged_runs(vae_lib, vae, z, x, timestep=DECODE_T)


def test_padded_edge_tiles_run_one_program_and_match(ragged):
    """Edge tiles padded to the tile shape give what the unpadded tiles give, in one compile (against four)."""
    check_ragged("LTX-Video", ragged[2])


def test_padded_ragged_grid_matches_reference(tiny, ragged):
    model, _ = tiny
    z, x, runs = ragged
    ref32, ref64 = _decode_ref(model, z, [DECODE_T], RAGGED)
    check("decode ragged tiled", runs["decode"][0], ref32, ref64)
    check_encode("encode ragged tiled", model, lambda xx, t: tuple(runs["encode"][0]), x, RAGGED)


def test_encode_matches_reference(tiny):
    model, vae = tiny
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 9, 64, 96)).astype(np.float32)
    mean, _ = check_encode("encode", model, lambda xx, t: vae_lib.encode(vae, xx, tiling=t), x)
    assert mean.shape == (2, 8, 2, 2, 3)


def test_encode_tiled_matches_reference(tiny):
    """One frame, as image-to-video encodes its conditioning image."""
    model, vae = tiny
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 1, 64, 128)).astype(np.float32)
    assert vae_lib.encode_plan(vae.cfg, x.shape[3:], ROW_TILES).num_tiles == 4
    check_encode("encode tiled", model, lambda xx, t: vae_lib.encode(vae, xx, tiling=t), x, ROW_TILES)


def test_plain_decoder_matches_reference(tmp_path_factory):
    model = _reference(PLAIN_DECODER, 5)
    config, tensors = _saved(model, tmp_path_factory, "ltx_vae_plain")
    vae = vae_lib.load_vae(vae_lib.LTXVAEConfig.from_config(config), tensors, with_encoder=False)
    assert vae.encoder is None
    z = _latents((1, 8, 2, 2, 2), seed=6)
    ref32, ref64 = _decode_ref(model, z, None)
    check("decode plain", vae_lib.decode(vae, z), ref32, ref64)


def test_unsupported_layouts_are_refused():
    with pytest.raises(UserError, match="decoder_inject_noise"):
        vae_lib.LTXVAE(vae_lib.LTXVAEConfig.from_config(dict(TINY, decoder_inject_noise=(True,) * 4)))
    with pytest.raises(UserError, match="LTXVideo095DownBlock3D"):
        vae_lib.LTXVAE(vae_lib.LTXVAEConfig.from_config(dict(TINY, down_block_types=("LTXVideoDownBlock3D",) * 4)))
    with pytest.raises(UserError, match="changes width"):  # diffusers raises an IndexError on this config
        vae_lib.LTXVAE(vae_lib.LTXVAEConfig.from_config(dict(PLAIN_DECODER, timestep_conditioning=True)),
                       with_encoder=False)


# ----------------------------------------------------------------------------------------------------------------
# the original single-file layout


def to_original_key(key: str, down_blocks: int) -> str:
    """diffusers name -> the original ``ltxv-*.safetensors`` name (0.9.5+), written from the original layout: flat
    block lists, ``res_blocks``, ``norm3.norm``, plain ``conv_shortcut``, ``last_*`` decoder head, statistics."""
    stats = {"latents_mean": "per_channel_statistics.mean-of-means",
             "latents_std": "per_channel_statistics.std-of-means"}
    if key in stats:
        return "vae." + stats[key]
    parts = key.split(".")
    if parts[0] == "decoder":
        if parts[1] == "mid_block":
            parts[1:2] = ["up_blocks", "0"]
        elif parts[1] == "up_blocks":
            k = int(parts[2])
            if parts[3] == "upsamplers":
                parts[1:5] = ["up_blocks", str(2 * k + 1)]
            else:
                parts[1:3] = ["up_blocks", str(2 * k + 2)]
        elif parts[1] in ("time_embedder", "scale_shift_table"):
            parts[1] = "last_" + parts[1]
    else:
        if parts[1] == "mid_block":
            parts[1:2] = ["down_blocks", str(down_blocks - 1)]
        elif parts[1] == "down_blocks":
            k = int(parts[2])
            if parts[3] == "downsamplers":
                parts[1:5] = ["down_blocks", str(2 * k + 1)]
            else:
                parts[1:3] = ["down_blocks", str(2 * k)]
    key = ".".join(parts).replace("resnets", "res_blocks").replace("norm3", "norm3.norm")
    return "vae." + key.replace("conv_shortcut.conv.", "conv_shortcut.")


def original_state_dict(state: dict, down_blocks: int) -> dict:
    c = state["latents_mean"].shape[0]
    out = {to_original_key(k, down_blocks): v for k, v in state.items()}
    for extra in ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means"):  # unused statistics
        out["vae.per_channel_statistics." + extra] = np.ones((c,), np.float32)
    out["model.diffusion_model.patchify_proj.weight"] = np.zeros((2, 2), np.float32)  # the DiT's part of the file
    return out


def test_original_layout_loads_the_same_params(tiny):
    from vidax_ltx.vae_convert import original_vae_tensors

    model, vae = tiny
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    original = original_state_dict(state, down_blocks=9)
    # the oracle: diffusers' own single-file conversion maps these names back onto the diffusers ones (its 0.9.5+
    # table is chosen by the encoder's full width; a stand-in of that width makes it pick the table)
    from diffusers.loaders.single_file_utils import convert_ltx_vae_checkpoint_to_diffusers

    probe = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in original.items()}
    probe["vae.encoder.conv_out.conv.weight"] = torch.zeros(1, 2048)
    converted = convert_ltx_vae_checkpoint_to_diffusers(probe)
    assert sorted(converted) == sorted(state)
    renamed = original_vae_tensors(original)
    assert sorted(renamed) == sorted(state)
    cfg = vae_lib.LTXVAEConfig.from_config(dict(model.config))
    assert_same_params(vae_lib.load_vae(cfg, original, with_encoder=True), vae)  # recognised by its vae.* keys


def test_missing_and_foreign_keys_are_reported(tiny):
    from vidax_core.io.convert import ConversionError

    model, _ = tiny
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    del state["decoder.mid_block.resnets.0.conv1.conv.weight"]
    state["decoder.bogus.weight"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError, match="1 missing.*1 unexpected"):
        vae_lib.load_vae(vae_lib.LTXVAEConfig.from_config(dict(model.config)), state, with_encoder=True)


# ----------------------------------------------------------------------------------------------------------------
# spread over devices

_SPREAD_SCRIPT = r"""
import json, os, sys
import numpy as np
import jax
jax.config.update("jax_default_matmul_precision", "highest")
from vidax_core.io.safetensors import SafetensorsFile
from vidax_ltx import vae as vae_lib
folder, config = sys.argv[1], json.loads(sys.argv[2])
vae = vae_lib.load_vae(vae_lib.LTXVAEConfig.from_config(config),
                       SafetensorsFile(os.path.join(folder, "diffusion_pytorch_model.safetensors")), with_encoder=True)
tiles = dict(tile_sample_min_height=64, tile_sample_min_width=64, tile_sample_stride_height=64,
             tile_sample_stride_width=32)
z = np.random.default_rng(0).standard_normal((2, 8, 1, 2, 3)).astype(np.float32)
devs = jax.devices()
out = {"devices": len(devs)}
# 3 tiles of entry 0 over 3 devices; then 2 batch entries, each its own unit (one device, entry by entry, is the same)
one = vae_lib.decode(vae, z[:1], timestep=0.05, tiling=tiles, devices=devs[:1])
out["decode_tiled"] = float(np.abs(one - vae_lib.decode(vae, z[:1], timestep=0.05, tiling=tiles, devices=devs)).max())
one = np.concatenate([vae_lib.decode(vae, z[i : i + 1], timestep=0.05, devices=devs[:1]) for i in range(2)])
out["decode_batch"] = float(np.abs(one - vae_lib.decode(vae, z, timestep=0.05, devices=devs)).max())
# 2 entries x 3 padded tiles (the right one 1 latent of 2): groups of 4 and 2 units, one area row per entry
one = np.concatenate([vae_lib.decode(vae, z[i : i + 1], timestep=0.05, tiling=tiles, devices=devs[:1])
                      for i in range(2)])
out["decode_tiled_batch"] = float(np.abs(one - vae_lib.decode(vae, z, timestep=0.05, tiling=tiles, devices=devs)).max())
x = np.random.default_rng(1).uniform(-1, 1, (2, 3, 1, 64, 96)).astype(np.float32)
one = np.concatenate([np.stack(vae_lib.encode(vae, x[i : i + 1], tiling=tiles, devices=devs[:1])) for i in range(2)],
                     axis=1)
out["encode_tiled_batch"] = float(np.abs(one - np.stack(vae_lib.encode(vae, x, tiling=tiles, devices=devs))).max())
print(json.dumps(out))
"""


def test_spread_over_devices_equals_one_device(tiny, tmp_path):
    """Tiles and batch entries spread over 4 fake CPU devices (a subprocess: the device count is fixed at jax
    import) give exactly the single-device result, padded edge tiles of several entries stacked included."""
    import json
    import subprocess
    import sys

    model, _ = tiny
    model.save_pretrained(str(tmp_path))
    config = {k: (list(v) if isinstance(v, tuple) else v)
              for k, v in dict(model.config).items() if not k.startswith("_")}
    env = dict(os.environ, XLA_FLAGS=xla_flags(4), JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", _SPREAD_SCRIPT, str(tmp_path), json.dumps(config)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(out)
    assert out.pop("devices") == 4
    assert out == {"decode_tiled": 0.0, "decode_batch": 0.0, "decode_tiled_batch": 0.0, "encode_tiled_batch": 0.0}
