"""Full-size architecture check without weights for every Kandinsky 5 id: the published transformer configs
(tests/kandinsky_published.py) are built by diffusers' ``Kandinsky5Transformer3DModel`` on the meta device;
their key -> shape
lists must be exactly what vidax's key table expects from the ``eval_shape`` tree of the full-size vidax DiT, with
the published parameter counts (Lite "2B", Pro "19B"). The published config folders parse, the dry run plans them
and every registered id is covered."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from kandinsky_published import FOLDERS, MODELS  # noqa: E402
from vidax_core.testing.reference import check_full_size, registered_models  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky_full_size")

PARAMS = {"lite": (1.8e9, 2.2e9), "pro": (18.5e9, 19.5e9)}  # the model cards' 2B and 19B


def test_every_registered_model_is_covered():
    k5 = {m for m in registered_models("kandinsky") if m.startswith("kandinsky5")}  # Kandinsky 6: test_k6_full_size
    assert k5 == set(FOLDERS)
    assert {f for folders in FOLDERS.values() for f in folders} == set(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_size_dit(name):
    from diffusers import Kandinsky5Transformer3DModel

    from vidax_kandinsky.convert_dit import DIT_RULES
    from vidax_kandinsky.dit import KandinskyDiT, KandinskyDiTConfig

    dit = MODELS[name][0]
    cfg = KandinskyDiTConfig.from_config(dit)
    size = check_full_size(lambda: Kandinsky5Transformer3DModel(**dit), DIT_RULES,
                           lambda: KandinskyDiT(cfg, rngs=nnx.Rngs(0)), label=name,
                           params=PARAMS["pro" if "pro" in name else "lite"])
    assert size.flat[("visual_blocks", "self_attention", "to_q", "kernel")].shape == \
        (cfg.num_visual_blocks, cfg.model_dim, cfg.model_dim)
    assert size.flat[("visual_embeddings", "kernel")].shape == (4 * 33, cfg.model_dim)  # 2 x 16 + 1 channels


def test_published_folders_plan(tmp_path):
    """Each written folder's configs parse as the plugin reads them (``check_checkpoint`` finds no problem at the
    preset size; a NABLA checkpoint names the size its blocks need) and size the latent grid."""
    from kandinsky_published import write_folders

    from vidax_core import Checkpoint
    from vidax_core.plugins import Plugins
    from vidax_core.testing.checks import resolve
    from vidax_kandinsky.plugin import KandinskyPlugin
    plugin = KandinskyPlugin()

    p = Plugins()
    p.add(plugin, "kandinsky", "vidax-kandinsky", "0.1.0")
    for root in write_folders(str(tmp_path)):
        name = root.rsplit("/", 1)[-1]
        model_id = next(i for i, folders in FOLDERS.items() if name in folders)
        spec = p.registry.get(model_id)
        run = resolve(p, [f"model.id={model_id}", *(["image=x.png"] if "i2v" in model_id else [])])
        problems = p.call("check_checkpoint", spec, ckpt=Checkpoint(root), run=run)
        assert problems == []
        bad = resolve(p, [f"model.id={model_id}", "sampling.height=480",
                          *(["image=x.png"] if "i2v" in model_id else [])])
        problems = p.call("check_checkpoint", spec, ckpt=Checkpoint(root), run=bad)
        assert bool(problems) == (MODELS[name][0]["attention_type"] == "nabla"), problems
        grid = (31, 96, 128) if model_id == "kandinsky5-t2v-pro" else (31, 64, 96)  # 121 frames, the preset size
        assert p.call("vae_latent_shape", spec, ckpt=Checkpoint(root), run=run) == grid
