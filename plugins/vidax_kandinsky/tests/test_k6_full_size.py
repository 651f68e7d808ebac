"""Full-size architecture check without weights for every Kandinsky 6 id: the published configs
(tests/kandinsky6_published.py) are built by diffusers' classes on the meta device, and their key -> shape lists
must be exactly what vidax's key tables expect from the ``eval_shape`` trees of the full-size vidax models, with
the published parameter counts (model cards: Pro "29B", Lite "3B", VSR DiT 1.41B, K-VAE 1.74B, upscaler bank
3.65B). The written config folders parse as the plugins read them and plan the preset sizes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from kandinsky6_published import SR, TI2VA  # noqa: E402
from vidax_core.testing.reference import check_full_size, meta_tensors, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_full_size")

PARAMS = {"pro": (29.5e9, 30.5e9), "lite": (3.0e9, 3.4e9)}  # 30.1B (Pro, "29B"), 3.2B (Lite, "3B")


def test_every_k6_id_is_covered():
    ids = {i for i in registered_models("kandinsky") if i.startswith("kandinsky6")}
    assert ids == set(TI2VA) | set(SR)


@pytest.mark.parametrize("name", sorted(TI2VA))
def test_full_size_ti2va_dit(name):
    from diffusers import Kandinsky6Transformer3DModel

    from vidax_kandinsky.k6_convert import K6_DIT_RULES
    from vidax_kandinsky.k6_dit import Kandinsky6DiT, Kandinsky6DiTConfig

    dit = TI2VA[name][0]
    cfg = Kandinsky6DiTConfig.from_config(dit)
    size = check_full_size(lambda: Kandinsky6Transformer3DModel(**dit), K6_DIT_RULES,
                           lambda: Kandinsky6DiT(cfg, rngs=nnx.Rngs(0)), label=name,
                           params=PARAMS["pro" if "pro" in name else "lite"])
    assert size.flat[("visual_embeddings", "kernel")].shape == (4 * 33, cfg.model_dim)  # 2 x 16 + 1 channels


def test_full_size_sr_models():
    """The VSR DiT of both repos, the K-VAE (both halves) and the upscaler bank's x2 and x4 models."""
    from diffusers import Kandinsky6SRLatentUpscalerBank, Kandinsky6SRTransformer3DModel, Kandinsky6SRVAE

    from vidax_core.io.convert import convert
    from vidax_core.nn.state import abstract_model
    from vidax_kandinsky.k6_convert import K6SR_DIT_RULES
    from vidax_kandinsky.k6sr_dit import Kandinsky6SRDiT, Kandinsky6SRDiTConfig
    from vidax_kandinsky.k6sr_upscaler import Kandinsky6SRUpscalerConfig, LatentUpscaler, used_tensors
    from vidax_kandinsky.k6sr_vae import KVAE, VAE_RULES, Kandinsky6SRVAEConfig, mirror_rules

    for name, (dit, _) in SR.items():
        cfg = Kandinsky6SRDiTConfig.from_config(dit)
        check_full_size(lambda: Kandinsky6SRTransformer3DModel(**dit), K6SR_DIT_RULES,
                        lambda: Kandinsky6SRDiT(cfg, rngs=nnx.Rngs(0)), label=name, params=(1.38e9, 1.44e9))
    vae = Kandinsky6SRVAEConfig()
    check_full_size(Kandinsky6SRVAE, VAE_RULES, lambda: KVAE(vae), component="vae", label="K-VAE",
                    params=(1.70e9, 1.78e9))
    bank = meta_tensors(Kandinsky6SRLatentUpscalerBank)
    total = sum(int(np.prod(v.shape)) for v in bank.values())
    print(f"latent upscaler bank: {total / 1e9:.3f}B parameters")
    assert 3.60e9 < total < 3.70e9
    up = Kandinsky6SRUpscalerConfig()
    for scale in up.scales:
        _, _, flat = abstract_model(lambda s=scale: LatentUpscaler(up, s))
        convert(used_tensors(up, bank, scale), mirror_rules(".*"), flat, component=f"upscaler x{scale}",
                check_only=True)


def test_published_folders_plan(tmp_path):
    """Each written folder's configs parse as the plugins read them (``check_checkpoint`` finds no problem at the
    preset size) and give the preset's latent grid: 121 frames at 480 x 864 (the SR: one 512 x 768 tile's grid)."""
    from kandinsky6_published import write_folders

    from vidax_core import Checkpoint
    from vidax_core.plugins import Plugins
    from vidax_core.testing.checks import resolve
    from vidax_kandinsky.k6_plugin import Kandinsky6Plugin
    from vidax_kandinsky.k6sr_plugin import Kandinsky6SRPlugin

    k6, k6sr = Kandinsky6Plugin(), Kandinsky6SRPlugin()

    p = Plugins()
    p.add(k6, "kandinsky6", "vidax-kandinsky", "0.1.0")
    p.add(k6sr, "kandinsky6_sr", "vidax-kandinsky", "0.1.0")
    for root in write_folders(str(tmp_path)):
        model_id = root.rsplit("/", 1)[-1]
        spec = p.registry.get(model_id)
        run = resolve(p, [f"model.id={model_id}"])
        assert p.call("check_checkpoint", spec, ckpt=Checkpoint(root), run=run) == [], model_id
        grid = (31, 32, 48) if model_id in SR else (31, 60, 108)
        assert p.call("vae_latent_shape", spec, ckpt=Checkpoint(root), run=run) == grid, model_id
