"""Kandinsky 6 SR DiT parity against diffusers' ``Kandinsky6SRTransformer3DModel`` (torch is a test-only oracle):
NABLA block-sparse attention with a narrow sliding-tile window (the mask is truly sparse; the reference's
BlockMask applied as the compiled flex kernel applies it, since flex attention's eager CPU fallback attends
densely), a 2x2 patch with a
PiFlow-widened head and another RoPE scale, the default window.

fp32 with ``jax_default_matmul_precision=highest``. Bound 1e-5 relative L2; the mutation test shows a wrong NABLA
threshold or window, and dense attention, land far past it."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import abstract_model, convert, materialize  # noqa: E402
from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.reference import block_masked_flex, randomize_, state_arrays  # noqa: E402
from vidax_kandinsky import k6sr_dit  # noqa: E402
from vidax_kandinsky.k6_convert import K6SR_DIT_RULES  # noqa: E402
from vidax_kandinsky.k6sr_tiny import TINY_SR_DIT  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_sr")

BOUND = 1e-5
VARIANTS = {
    "sparse": dict(TINY_SR_DIT, nabla_window=(1, 1, 1), nabla_threshold=0.5),
    "patch2_piflow": dict(TINY_SR_DIT, patch_size=(1, 2, 2), out_visual_dim=3 * TINY_SR_DIT["in_visual_dim"],
                          scale_factor=(1.0, 3.0, 1.5), nabla_window=(3, 1, 3), nabla_threshold=0.6),
    "default_window": dict(TINY_SR_DIT, nabla_window=(11, 7, 7)),
}
SHAPES = {"sparse": (2, 16, 24), "patch2_piflow": (3, 32, 16), "default_window": (1, 16, 16)}


def build(variant: str):
    from diffusers import Kandinsky6SRTransformer3DModel

    torch.manual_seed(0)
    model = Kandinsky6SRTransformer3DModel(**VARIANTS[variant]).eval().float()
    randomize_(model, 3, 0.15)
    return model, state_arrays(model), k6sr_dit.Kandinsky6SRDiTConfig.from_config(dict(model.config))


@pytest.fixture(scope="module")
def models():
    return {v: build(v) for v in VARIANTS}


def inputs(cfg, shape, batch=2):
    rng = np.random.default_rng(1)
    return {"latents": rng.standard_normal((batch, *shape, cfg.in_channels)).astype(np.float32),
            "timestep": np.array([937.5, 250.0][:batch], np.float32)}


def run_reference(model, x) -> np.ndarray:
    """The reference with its NABLA BlockMask applied as the compiled flex kernel applies it
    (:func:`vidax_core.testing.reference.block_masked_flex`)."""
    from diffusers.models.transformers import transformer_kandinsky6_sr as tk

    with block_masked_flex(tk), torch.no_grad():
        return model(hidden_states=torch.from_numpy(x["latents"]), timestep=torch.from_numpy(x["timestep"]),
                     return_dict=False)[0].numpy()


def run_vidax(cfg, weights, x) -> np.ndarray:
    graphdef, state, flat = abstract_model(lambda: k6sr_dit.Kandinsky6SRDiT(cfg, rngs=nnx.Rngs(0)))
    model = materialize(graphdef, state, convert(weights, K6SR_DIT_RULES, flat, component="transformer"))
    return np.asarray(jax.jit(lambda m, a, t: m(a, t))(model, x["latents"], x["timestep"]))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_sr_dit_matches_diffusers(models, variant):
    model, weights, cfg = models[variant]
    x = inputs(cfg, SHAPES[variant])
    got, ref = run_vidax(cfg, weights, x), run_reference(model, x)
    assert got.shape == ref.shape == x["latents"].shape[:-1] + (cfg.out_visual_dim,)
    err = rel_l2(got, ref)
    print(f"kandinsky6 sr dit {variant}: rel {err:.3e}")
    assert err <= BOUND


def test_sr_dit_wrong_pieces_are_caught(models):
    """Another NABLA threshold or window, or dense attention (a window covering every block), is far off."""
    model, weights, cfg = models["sparse"]
    x = inputs(cfg, SHAPES["sparse"])
    ref = run_reference(model, x)
    for name, wrong in (("threshold 0.9", dataclasses.replace(cfg, nabla_threshold=0.9)),
                        ("window 3", dataclasses.replace(cfg, nabla_window=(1, 3, 3))),
                        ("dense", dataclasses.replace(cfg, nabla_window=(11, 99, 99)))):
        err = rel_l2(run_vidax(wrong, weights, x), ref)
        print(f"kandinsky6 sr dit, {name}: rel {err:.3e}")
        assert err > 100 * BOUND, name
