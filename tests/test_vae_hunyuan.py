"""Parity of the HunyuanVideo VAE against diffusers' AutoencoderKLHunyuanVideo on a tiny random model.

Decode and encode, with the clip as one tile, diffusers' default temporal tiling (clips above 16 pixel / 4 latent
frames), and spatial + temporal tiles at small sizes whose strides do not divide the clip. Tolerances come from the
reference's own fp32 error: the same diffusers model in float64 is the truth, and vidax may be at most
``vae_parity.FACTOR`` times as far from it as diffusers in fp32 is. Also: the original ``.pt`` layout loads to
exactly the diffusers params, and the published full-size config matches vidax's abstract tree key for key.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from vidax_core.testing.devices import xla_flags

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.testing.reference import randomize_scaled_  # noqa: E402
from vidax_core.testing.tiny.wan_vae_parity import check  # noqa: E402

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.convert import ConversionError, convert  # noqa: E402
from vidax_core.nn.state import abstract_model, flat_state  # noqa: E402
from vidax_core.vae.convert_hunyuan import VAE_RULES, open_original_vae  # noqa: E402
from vidax_core.vae.hunyuan import HunyuanVAE, HunyuanVAEConfig, decode, encode, load_vae  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan_vae")

# HunyuanVideo's VAE in miniature: 4 blocks (3 spatial levels, 2 temporal), a mid-block attention, shortcuts.
TINY = dict(latent_channels=4, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4)

# The published vae/config.json (hunyuanvideo-community/HunyuanVideo, diffusers layout).
PUBLISHED = {
    "_class_name": "AutoencoderKLHunyuanVideo", "act_fn": "silu", "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["HunyuanVideoDownBlock3D"] * 4, "in_channels": 3, "latent_channels": 16,
    "layers_per_block": 2, "mid_block_add_attention": True, "norm_num_groups": 32, "out_channels": 3,
    "scaling_factor": 0.476986, "spatial_compression_ratio": 8, "temporal_compression_ratio": 4,
    "up_block_types": ["HunyuanVideoUpBlock3D"] * 4,
}

_DEFAULT_KNOBS = dict(tile_sample_min_height=256, tile_sample_min_width=256, tile_sample_min_num_frames=16,
                      tile_sample_stride_height=192, tile_sample_stride_width=192, tile_sample_stride_num_frames=12)


def random_hunyuan_vae(config: dict):
    """AutoencoderKLHunyuanVideo(**config) with every parameter random (norm gains near 1) and O(1) activations."""
    from diffusers import AutoencoderKLHunyuanVideo

    torch.manual_seed(0)
    ref = AutoencoderKLHunyuanVideo(**config).eval()
    randomize_scaled_(ref)
    return ref


def run_ref(model, fn: str, x: np.ndarray, tiling: dict | None = None) -> np.ndarray:
    """diffusers decode / encode (latent mean and logvar stacked) with the tiling knobs as given, else defaults."""
    model.disable_tiling()
    for k, v in _DEFAULT_KNOBS.items():
        setattr(model, k, v)
    if tiling:
        model.enable_tiling(**tiling)
    dtype = next(model.parameters()).dtype
    try:
        with torch.no_grad():
            t = torch.from_numpy(x).to(dtype)
            if fn == "decode":
                return model.decode(t).sample.numpy()
            dist = model.encode(t).latent_dist
            return np.stack([dist.mean.numpy(), dist.logvar.numpy()])
    finally:
        model.disable_tiling()
        for k, v in _DEFAULT_KNOBS.items():
            setattr(model, k, v)


@pytest.fixture(scope="module")
def models():
    ref = random_hunyuan_vae(TINY)
    cfg = HunyuanVAEConfig.from_config({**dict(ref.config), "_class_name": "AutoencoderKLHunyuanVideo"})
    tensors = {k: v.numpy() for k, v in ref.state_dict().items()}
    return ref, cfg, tensors, load_vae(cfg, tensors)


@pytest.fixture(scope="module")
def ref64(models):
    return copy.deepcopy(models[0]).double()


def _latents(frames: int, hw: int = 4, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, TINY["latent_channels"], frames, hw, hw)).astype(np.float32)


def _video(frames: int, hw: int = 32, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (1, 3, frames, hw, hw)).astype(np.float32)


# Small tiles. 2-D: tiles of 3 latent / 24 pixels every 2 / 16 on 40-pixel frames (3 x 3 tiles, edge tiles
# smaller, blends both ways reading blended neighbours). With temporal tiles (of 3 latent / 12 pixel frames every
# 2 / 8, blended over 4 pixel / 1 latent frames, the last tile shorter), height tiles only: fewer programs to compile.
SPATIAL = dict(tile_sample_min_height=24, tile_sample_min_width=24, tile_sample_stride_height=16,
               tile_sample_stride_width=16)
TEMPORAL = dict(SPATIAL, tile_sample_min_width=64, tile_sample_min_num_frames=12, tile_sample_stride_num_frames=8)

DECODE_CASES = {
    "whole clip (3 latent frames)": (_latents(3), None, 1),
    "default temporal tiles (6 latent frames)": (_latents(6, seed=2), None, 2),
    "height + temporal small tiles": (_latents(4, seed=4), TEMPORAL, 2),
    "2-D spatial tiles, no temporal tiling (framewise off)": (_latents(3, hw=5, seed=5), SPATIAL, 1),
}


@pytest.mark.parametrize("case", sorted(DECODE_CASES))
def test_decode_matches_diffusers(models, ref64, case):
    ref, _, _, vae = models
    z, tiling, chunks = DECODE_CASES[case]
    ours_tiling = tiling
    if "framewise off" in case:
        ref.use_framewise_decoding = ref64.use_framewise_decoding = False
        ours_tiling = dict(tiling, framewise=False)
    try:
        expected = run_ref(ref, "decode", z, tiling)
        expected64 = run_ref(ref64, "decode", z, tiling)
    finally:
        ref.use_framewise_decoding = ref64.use_framewise_decoding = True
    calls = []
    got = decode(vae, z, tiling=ours_tiling, on_chunk=lambda d, n: calls.append((d, n)))
    assert got.shape == expected.shape == (1, 3, 4 * (z.shape[2] - 1) + 1, 8 * z.shape[3], 8 * z.shape[4])
    assert got.dtype == np.float32
    assert calls == [(k + 1, chunks) for k in range(chunks)]
    check(f"hunyuan decode, {case}", got, expected, expected64)


ENCODE_CASES = {
    "whole clip (9 frames)": (_video(9, hw=16), None),
    "default temporal tiles (21 frames)": (_video(21, hw=16, seed=6), None),
    "height + temporal small tiles": (_video(13, hw=32, seed=7), TEMPORAL),
}


@pytest.mark.parametrize("case", sorted(ENCODE_CASES))
def test_encode_matches_diffusers(models, ref64, case):
    ref, _, _, vae = models
    x, tiling = ENCODE_CASES[case]
    expected = run_ref(ref, "encode", x, tiling)
    expected64 = run_ref(ref64, "encode", x, tiling)
    mean, logvar = encode(vae, x, tiling=tiling)
    got = np.stack([mean, logvar])
    assert got.shape == expected.shape
    assert got.shape[3] == (x.shape[2] - 1) // 4 + 1
    check(f"hunyuan encode, {case}", got, expected, expected64)


def test_frame_causal_attention_is_the_reference_mask():
    """Per-frame attention calls equal one dense softmax with diffusers' causal frame mask."""
    from diffusers.models.autoencoders.autoencoder_kl_hunyuan_video import prepare_causal_attention_mask

    from vidax_core.vae.hunyuan_blocks import frame_causal_attention

    frames, hw, d = 3, 4, 8
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((2, frames * hw, 1, d)) for _ in range(3))
    mask = prepare_causal_attention_mask(frames, hw, torch.float64, "cpu").numpy()
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d) + mask
    p = np.exp(logits - logits.max(-1, keepdims=True))
    expected = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)
    got = np.asarray(frame_causal_attention(*(a.astype(np.float32) for a in (q, k, v)), frames))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_decode_only_build_and_bad_input(models):
    ref, cfg, tensors, vae = models
    dec = load_vae(cfg, tensors, with_encoder=False)
    assert dec.encoder is None and dec.quant_conv is None
    full = flat_state(vae)
    part = flat_state(dec)
    assert set(part) == {k for k in full if k[0] in ("decoder", "post_quant_conv")}
    for k, v in part.items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(full[k]))
    z = _latents(2)
    with pytest.raises(ValueError):
        encode(dec, _video(5))
    with pytest.raises(UserError, match="latents"):
        decode(vae, z[:, :2])
    with pytest.raises(UserError, match="tiling"):
        decode(vae, z, tiling=dict(tile_overlap_factor_height=0.2))
    with pytest.raises(UserError, match="stride"):
        decode(vae, z, tiling=dict(tile_sample_min_height=16, tile_sample_stride_height=24))
    with pytest.raises(UserError, match="latent position"):
        decode(vae, z, tiling=dict(tile_sample_stride_num_frames=2))
    with pytest.raises(UserError):
        HunyuanVAEConfig.from_config({**TINY, "temporal_compression_ratio": 8})
    with pytest.raises(ConversionError):
        load_vae(cfg, {k: v for k, v in tensors.items() if "mid_block.attentions" not in k})


@pytest.mark.parametrize("layout", ["plain", "wrapped_prefixed"])
def test_original_pt_loads_to_diffusers_params(models, tmp_path, layout):
    """The original pytorch_model.pt (same key names as diffusers, optionally under ``state_dict`` with ``vae.``
    prefixes, read pickle-free) gives exactly the params of the diffusers twin."""
    ref, cfg, tensors, vae = models
    sd = {k: v.clone() for k, v in ref.state_dict().items()}
    obj = sd if layout == "plain" else {"state_dict": {f"vae.{k}": v for k, v in sd.items()}, "epoch": 3}
    path = tmp_path / "pytorch_model.pt"
    torch.save(obj, path)
    orig = load_vae(cfg, open_original_vae(path))
    ours, theirs = flat_state(orig), flat_state(vae)
    assert ours.keys() == theirs.keys()
    for k in theirs:
        np.testing.assert_array_equal(np.asarray(ours[k]), np.asarray(theirs[k]))


def test_full_size_published_config_matches_diffusers_keys():
    """The published config, built by diffusers on the meta device: its key -> shape list is exactly what vidax's
    table expects from the abstract full-size vidax VAE."""
    from diffusers import AutoencoderKLHunyuanVideo

    with torch.device("meta"):
        ref = AutoencoderKLHunyuanVideo.from_config(PUBLISHED)
    zero = np.zeros((), np.float32)
    shapes = {k: np.broadcast_to(zero, tuple(v.shape)) for k, v in ref.state_dict().items()}
    cfg = HunyuanVAEConfig.from_config(PUBLISHED)
    _, _, flat = abstract_model(lambda: HunyuanVAE(cfg))
    convert(shapes, VAE_RULES, flat, component="vae", check_only=True)
    n = sum(int(np.prod(v.shape)) for v in flat.values())
    assert n == sum(int(np.prod(v.shape)) for v in ref.state_dict().values())
    print(f"full-size HunyuanVideo VAE: {len(flat)} tensors, {n / 1e6:.2f}M params")


_SPREAD_SCRIPT = r"""
import json, sys
import numpy as np
import jax
jax.config.update("jax_default_matmul_precision", "highest")
import vidax_core.vae.tiling as tiling_mod
from vidax_core.vae.hunyuan import HunyuanVAEConfig, decode, load_vae
used = []
placements = tiling_mod.placements
tiling_mod.placements = lambda devs: (used.append(len(devs)), placements(devs))[1]
args = json.loads(sys.argv[1])
tensors = dict(np.load(args["tensors"]))
vae = load_vae(HunyuanVAEConfig.from_config(args["config"]), tensors, with_encoder=False)
out = decode(vae, np.load(args["z"]), tiling=args["tiling"], devices=jax.devices())
np.save(args["out"], out)
print(json.dumps({"devices": jax.device_count(), "used": used}))
"""


def test_tiles_spread_over_devices_equal_one_device(models, tmp_path):
    """3 height tiles of 2 shapes spread over 2 fake CPU devices (one program per tile shape, tiles stacked on the
    batch axis, one per device) compute exactly what one device does. The spread run is a subprocess (the fake
    device count is fixed before jax starts) given the same weights and latents."""
    import json
    import os
    import subprocess
    import sys

    _, _, tensors, vae = models
    z = _latents(3, hw=6, seed=5)
    tiling = dict(TEMPORAL, framewise=False)
    np.savez(tmp_path / "w.npz", **tensors)
    np.save(tmp_path / "z.npy", z)
    args = dict(tensors=str(tmp_path / "w.npz"), z=str(tmp_path / "z.npy"), out=str(tmp_path / "out.npy"),
                tiling=tiling, config=TINY)
    env = dict(os.environ, XLA_FLAGS=xla_flags(2), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SPREAD_SCRIPT, json.dumps(args)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["devices"] == 2 and r["used"] == [2]  # both devices took tiles
    spread = np.load(tmp_path / "out.npy")
    one = decode(vae, z, tiling=tiling)
    assert one.shape == spread.shape == (1, 3, 9, 48, 48)
    print(f"hunyuan decode over 2 devices vs one: max abs {np.abs(one - spread).max():.3e}")
    assert np.abs(one - spread).max() == 0.0
