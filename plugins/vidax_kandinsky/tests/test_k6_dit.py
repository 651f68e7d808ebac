"""Kandinsky 6 DiT parity against diffusers' ``Kandinsky6Transformer3DModel`` (torch is a test-only oracle), for
every flag the reference branches on: both streams or video only, the image-to-video reference tail (token types
and its RoPE frame index 0), ``cross_gates``, ``fix_modulation``, ``ca_rope``, a PiFlow-widened head, an audio
stream of another width, no ``visual_cond``.

fp32 with ``jax_default_matmul_precision=highest`` (the suite's conftest). Each variant's bound is 1e-5 relative L2
(the implementations agree to ~1e-7); the mutation tests show a dropped piece moves the output far past it."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import abstract_model, convert, materialize  # noqa: E402
from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.reference import randomize_, state_arrays  # noqa: E402
from vidax_kandinsky import k6_dit  # noqa: E402
from vidax_kandinsky.k6_convert import K6_DIT_RULES  # noqa: E402
from vidax_kandinsky.k6_tiny import TINY_K6_DIT  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky6_dit")

GRID = (3, 4, 6)  # latent frames, height, width: 3 x 2 x 3 patches
TEXT, AUDIO = 5, 7
BOUND = 1e-5

VARIANTS = {
    "release": {},
    "plain": dict(cross_gates=False, fix_modulation=False, ca_rope=False, visual_token_type_num_embeddings=0),
    "narrow_audio": dict(model_dim_a=24, ff_dim_a=40, axes_dims_a=(4, 4, 4), ca_rope=False, time_dim_a=16,
                         audio_freqs_scaling=0.5),
    "piflow": dict(out_visual_dim=3 * TINY_K6_DIT["in_visual_dim"], out_audio_dim=3 * TINY_K6_DIT["in_audio_dim"]),
    "no_cond": dict(visual_cond=False, visual_token_type_num_embeddings=0, scale_factor=(1.0, 3.0, 1.5)),
}


def build(variant: str):
    from diffusers import Kandinsky6Transformer3DModel

    torch.manual_seed(0)
    model = Kandinsky6Transformer3DModel(**{**TINY_K6_DIT, **VARIANTS[variant]}).eval().float()
    randomize_(model, 3, 0.15)
    return model, state_arrays(model), k6_dit.Kandinsky6DiTConfig.from_config(dict(model.config))


@pytest.fixture(scope="module")
def models():
    return {v: build(v) for v in VARIANTS}


def inputs(cfg, *, audio=True, tail=False, batch=2) -> dict:
    rng = np.random.default_rng(1)
    f = GRID[0] + int(tail)
    x = {"latents": rng.standard_normal((batch, f, *GRID[1:], cfg.in_channels)).astype(np.float32),
         "timestep": np.array([937.5, 250.0][:batch], np.float32),
         "hidden": rng.standard_normal((batch, TEXT, cfg.in_text_dim)).astype(np.float32),
         "pooled": rng.standard_normal((batch, cfg.in_text_dim2)).astype(np.float32)}
    if audio:
        x["audio"] = rng.standard_normal((batch, AUDIO, cfg.in_audio_dim)).astype(np.float32)
    if tail:
        x["frames"] = np.concatenate([np.arange(GRID[0]), [0]]).astype(np.int64)
        x["types"] = np.tile(np.array([0] * GRID[0] + [1], np.int64), (batch, 1))
    return x


def run_reference(model, x) -> list[np.ndarray]:
    t = lambda k: torch.from_numpy(x[k])  # noqa: E731
    kw = {}
    if "frames" in x:
        kw = dict(visual_rope_pos=(t("frames"), torch.arange(GRID[1] // 2), torch.arange(GRID[2] // 2)),
                  visual_token_type_ids=t("types"))
    with torch.no_grad():
        out = model(hidden_states=t("latents"), encoder_hidden_states=t("hidden"), pooled_projections=t("pooled"),
                    timestep=t("timestep"), audio_hidden_states=t("audio") if "audio" in x else None,
                    return_dict=False, **kw)
    return [o.numpy() for o in out]


def run_vidax(cfg, weights, x) -> list[np.ndarray]:
    graphdef, state, flat = abstract_model(lambda: k6_dit.Kandinsky6DiT(cfg, rngs=nnx.Rngs(0)))
    model = materialize(graphdef, state, convert(weights, K6_DIT_RULES, flat, component="transformer"))
    latents = {"video": x["latents"], "audio": x["audio"]} if "audio" in x else x["latents"]
    kw = {}
    if "frames" in x:
        b = x["latents"].shape[0]
        kw = {"frame_positions": np.tile(x["frames"].astype(np.int32), (b, 1)),
              "token_types": x["types"].astype(np.int32)}
    call = jax.jit(lambda m, *a, **k: m(*a, **k))
    out = call(model, latents, x["timestep"], {"hidden": x["hidden"], "pooled": x["pooled"]}, **kw)
    return [np.asarray(out["video"]), np.asarray(out["audio"])] if isinstance(out, dict) else [np.asarray(out)]


def _err(got, ref) -> float:
    assert [g.shape for g in got] == [r.shape for r in ref]
    return max(rel_l2(g, r) for g, r in zip(got, ref))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dit_matches_diffusers(models, variant):
    model, weights, cfg = models[variant]
    x = inputs(cfg)
    err = _err(run_vidax(cfg, weights, x), run_reference(model, x))
    print(f"kandinsky6 dit {variant}: rel {err:.3e}")
    assert err <= BOUND


def test_video_only_and_image_tail_match_diffusers(models):
    """No audio stream (``sample_audio=False``), and the image-to-video call with its reference tail frame."""
    model, weights, cfg = models["release"]
    for name, x in (("video only", inputs(cfg, audio=False)), ("image tail", inputs(cfg, tail=True))):
        err = _err(run_vidax(cfg, weights, x), run_reference(model, x))
        print(f"kandinsky6 dit {name}: rel {err:.3e}")
        assert err <= BOUND, name


def test_dropped_pieces_are_caught(models):
    """Each flag read the other way (no RoPE across the streams, the other stream's time embedding in the cross
    modulation), or the reference frame at its own RoPE position, lands far past the bound."""
    model, weights, cfg = models["release"]
    x = inputs(cfg, tail=True)
    ref = run_reference(model, x)
    config = dict(model.config)
    wrong_position = dict(x, frames=np.arange(GRID[0] + 1))
    for name, c, xi in (
            ("no ca_rope", {**config, "ca_rope": False}, x),
            ("no fix_modulation", {**config, "fix_modulation": False}, x),
            ("tail at its own position", config, wrong_position)):
        err = _err(run_vidax(k6_dit.Kandinsky6DiTConfig.from_config(c), weights, xi), ref)
        print(f"kandinsky6 dit, {name}: rel {err:.3e}")
        assert err > 100 * BOUND, name
