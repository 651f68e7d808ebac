"""LTX-Video latent upscaler parity against diffusers' LTXLatentUpsamplerModel (torch is a test-only oracle), and
the core GroupNorm it uses against torch's.

Tiny random models (every parameter randomised, GroupNorm gains included), saved with ``save_pretrained`` and read
back with vidax's safetensors reader; vidax must be within 4x the reference's own fp32 error, both measured against
the float64 reference (``vidax_core.testing.tiny.wan_vae_parity.check``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.convert import convert  # noqa: E402
from vidax_core.io.safetensors import SafetensorsFile  # noqa: E402
from vidax_core.nn.group_norm import GroupNorm  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_ltx import upsampler as up  # noqa: E402
from vidax_core.testing.reference import randomize_  # noqa: E402
from vidax_core.testing.tiny.wan_vae_parity import check  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx_vae")
diffusers.utils.logging.set_verbosity_error()

TINY = dict(in_channels=8, mid_channels=32, num_blocks_per_stage=2)


def _reference(config: dict, seed: int = 0):
    from diffusers.pipelines.ltx.modeling_latent_upsampler import LTXLatentUpsamplerModel

    model = LTXLatentUpsamplerModel(**config).eval().float()
    randomize_(model, seed, 0.1)
    return model


def _run(model, x: np.ndarray, dtype) -> np.ndarray:
    m = model.to(dtype)
    with torch.no_grad():
        out = m(torch.from_numpy(x).to(dtype)).numpy()
    model.float()
    return out


@pytest.mark.parametrize("variant", [
    dict(),  # the 0.9.8 spatial upscaler layout: 3-D net, per-frame 2-D upsampler
    dict(dims=2),  # everything per frame, GroupNorm included
    dict(spatial_upsample=False, temporal_upsample=True),
    dict(temporal_upsample=True),
], ids=["spatial3d", "spatial2d", "temporal", "spatiotemporal"])
def test_upsampler_matches_reference(variant, tmp_path):
    config = dict(TINY, **variant)
    model = _reference(config, seed=len(variant))
    model.save_pretrained(str(tmp_path))
    cfg = up.LTXUpsamplerConfig.from_config(dict(model.config))
    ours = up.load_upsampler(cfg, SafetensorsFile(os.path.join(str(tmp_path), "diffusion_pytorch_model.safetensors")))
    x = np.random.default_rng(0).standard_normal((2, 8, 3, 4, 5)).astype(np.float32)
    got = up.upsample(ours, x)
    ref32, ref64 = _run(model, x, torch.float32), _run(model, x, torch.float64)
    assert got.shape == ref64.shape
    check(f"upsampler {variant}", got, ref32, ref64)


def test_group_norm_statistics_span_the_given_axes():
    """The core GroupNorm vs torch's: over all frames (3-D), and per frame when asked (frames folded into batch)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 4, 5, 64)) * 3 + 1).astype(np.float32)  # (B, T, H, W, C)
    ref = torch.nn.GroupNorm(8, 64, eps=1e-6)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    for axes in (None, (2, 3)):
        norm = GroupNorm(64, 8, eps=1e-6, axes=axes)
        norm.scale[...] = ref.weight.detach().numpy()
        norm.bias[...] = ref.bias.detach().numpy()
        t = torch.from_numpy(np.moveaxis(x, -1, 1))  # (B, C, T, H, W)
        if axes is not None:
            t = t.permute(0, 2, 1, 3, 4).flatten(0, 1)  # (B*T, C, H, W)
        outs = []
        for dtype in (torch.float32, torch.float64):
            with torch.no_grad():
                o = ref.to(dtype)(t.to(dtype))
            o = o.unflatten(0, (2, 3)).permute(0, 1, 3, 4, 2) if axes is not None else o.permute(0, 2, 3, 4, 1)
            outs.append(o.numpy())
        ref.float()
        check(f"group norm axes={axes}", np.asarray(norm(x)), *outs)


def test_published_upsampler_layout():
    """The published 0.9.8 spatial upscaler: every key and shape of the meta-device reference lands on vidax."""
    from diffusers.pipelines.ltx.modeling_latent_upsampler import LTXLatentUpsamplerModel

    with torch.device("meta"):
        ref = LTXLatentUpsamplerModel(**up.PUBLISHED_UPSAMPLER_CONFIG)
    stand_ins = {k: np.broadcast_to(np.zeros((), np.float32), tuple(v.shape)) for k, v in ref.state_dict().items()}
    cfg = up.LTXUpsamplerConfig.from_config(up.PUBLISHED_UPSAMPLER_CONFIG)
    _, _, flat = abstract_model(lambda: up.LTXUpsampler(cfg))
    assert len(convert(stand_ins, up.UPSAMPLER_RULES, flat, check_only=True)) == len(flat)
    assert sum(int(np.prod(v.shape)) for v in flat.values()) == sum(int(np.prod(v.shape)) for v in stand_ins.values())


def test_bad_configs_are_refused():
    with pytest.raises(UserError, match="spatial_upsample or temporal_upsample"):
        up.LTXUpsamplerConfig.from_config(dict(TINY, spatial_upsample=False))
    with pytest.raises(UserError, match="dims=3"):
        up.LTXUpsamplerConfig.from_config(dict(TINY, dims=2, temporal_upsample=True))


@pytest.mark.parametrize("adain,tone", [(0.0, 0.0), (1.0, 0.0), (0.5, 0.6)])
def test_upsample_pipeline_latents_match_reference(adain, tone, tmp_path):
    """``LTXLatentUpsamplePipeline(latents=..., output_type="latent")`` with AdaIN and tone mapping on and off."""
    from diffusers import LTXLatentUpsamplePipeline

    from test_ltx_vae import TINY as TINY_VAE, _reference as random_vae

    vae = random_vae(TINY_VAE, 3)
    model = _reference(TINY, seed=4)
    model.save_pretrained(str(tmp_path))
    ours = up.load_upsampler(up.LTXUpsamplerConfig.from_config(dict(model.config)),
                             SafetensorsFile(os.path.join(str(tmp_path), "diffusion_pytorch_model.safetensors")))
    x = np.random.default_rng(5).standard_normal((1, 8, 2, 3, 4)).astype(np.float32)
    refs = []
    for dtype in (torch.float32, torch.float64):
        pipe = LTXLatentUpsamplePipeline(vae=vae.to(dtype), latent_upsampler=model.to(dtype))
        with torch.no_grad():
            refs.append(pipe(latents=torch.from_numpy(x).to(dtype), adain_factor=adain, tone_map_compression_ratio=tone,
                             output_type="latent").frames.numpy())
    got = up.upsample_latents(ours, x, latents_mean=vae.latents_mean.double().numpy(),
                              latents_std=vae.latents_std.double().numpy(), scaling_factor=vae.config.scaling_factor,
                              adain_factor=adain, tone_map_compression_ratio=tone)
    check(f"upsample pipeline adain={adain} tone={tone}", got, *refs)


def test_open_folder_and_original_file(tmp_path):
    """The diffusers folder and the original single file (same tensor names, config in the safetensors metadata, or
    none: the class defaults) load to the same parameters."""
    import json

    from safetensors.numpy import save_file

    from vidax_core.nn.state import flat_state

    model = _reference(TINY, seed=7)
    folder = tmp_path / "latent_upsampler"
    model.save_pretrained(str(folder))
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    single = str(tmp_path / "ltxv-spatial-upscaler-tiny.safetensors")
    config = {"_class_name": "LatentUpsampler",
              **{k: v for k, v in dict(model.config).items() if not k.startswith("_")}}
    save_file(state, single, metadata={"config": json.dumps(config)})
    a, b = flat_state(up.open_upsampler(str(folder))), flat_state(up.open_upsampler(single))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))
    bare = str(tmp_path / "no-metadata.safetensors")
    save_file(state, bare)
    from vidax_core.io.convert import ConversionError

    with pytest.raises(ConversionError, match="mis-shaped"):  # no config: the published 512-wide model, not this one
        up.open_upsampler(bare)
