"""Motif-Video DiT parity against diffusers' ``MotifVideoTransformer3DModel`` (torch is a test-only oracle), on every
branch its config takes: q/k norm kinds (RMS, LayerNorm, none: the conditioning stream's RMS norms stay), the
text cross-attention in dual and in single blocks, DDT decoder blocks (some, all, none of the single blocks), the
image projection with image tokens in front of the text, empty dual or single stacks, temporal and spatial patch
sizes, a padded text mask.

Each variant runs vidax in float32 against the reference in float64 (diffusers' timestep sinusoid in float64 too),
within a small multiple of the reference's own float32 error. The bound can fail: the decoder's streams attending
each to itself only, the cross-attention without RoPE on its queries, the text padding left unmasked, and image
tokens left out each land far past it.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import abstract_model, materialize  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.parity import fp32_tolerance  # noqa: E402
from vidax_core.testing.reference import randomize_, reference_in, state_arrays  # noqa: E402
from vidax_motif import dit as dit_lib  # noqa: E402
from vidax_motif.convert_dit import convert_dit  # noqa: E402

pytestmark = pytest.mark.xdist_group("motif_dit")

BASE = dict(in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=12, num_layers=2,
            num_single_layers=3, num_decoder_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1,
            qk_norm="rms_norm", text_embed_dim=20, image_embed_dim=18, rope_axes_dim=(4, 4, 4),
            enable_text_cross_attention_dual=True, enable_text_cross_attention_single=True)
VARIANTS = {
    "every_stage": {},
    "layer_norm_qk_no_decoder": dict(qk_norm="layer_norm", num_decoder_layers=0,
                                     enable_text_cross_attention_dual=False),
    "no_qk_norm_temporal_patch": dict(qk_norm=None, patch_size_t=2, image_embed_dim=None,
                                      enable_text_cross_attention_single=False),
    "all_singles_decoder_no_dual": dict(num_layers=0, num_decoder_layers=3, patch_size=1, rope_axes_dim=(4, 2, 6)),
    "no_single_blocks": dict(num_single_layers=0, num_decoder_layers=0, image_embed_dim=None),
}
GRID, TEXT, IMAGE = (2, 4, 6), 7, 5


def build(variant: str):
    from diffusers import MotifVideoTransformer3DModel

    torch.manual_seed(0)
    model = MotifVideoTransformer3DModel(**{**BASE, **VARIANTS[variant]}).eval().float()
    randomize_(model, 3, 0.2)
    return model, state_arrays(model), dit_lib.MotifDiTConfig.from_config(dict(model.config))


def inputs(cfg) -> dict:
    rng = np.random.default_rng(0)
    mask = np.ones((2, TEXT), np.int64)
    mask[1, 4:] = 0  # the second prompt is padded
    f = GRID[0] * cfg.patch_size_t
    x = {"latents": rng.standard_normal((2, cfg.in_channels, f, *GRID[1:])).astype(np.float32),
         "timestep": np.array([937.5, 40.0], np.float32),
         "hidden": rng.standard_normal((2, TEXT, cfg.text_embed_dim)).astype(np.float32), "mask": mask}
    if cfg.image_embed_dim is not None:
        x["image"] = rng.standard_normal((2, IMAGE, cfg.image_embed_dim)).astype(np.float32)
    return x


def run_reference(model, x, dtype) -> np.ndarray:
    t = lambda k: torch.from_numpy(x[k]).to(dtype)  # noqa: E731
    with reference_in(model, dtype) as m:
        out = m(t("latents"), t("timestep"), t("hidden"), torch.from_numpy(x["mask"]),
                image_embeds=t("image") if "image" in x else None, return_dict=False)[0]
    return out.double().numpy()


def run_vidax(cfg, weights, x, **context) -> np.ndarray:
    graphdef, state, flat = abstract_model(lambda: dit_lib.MotifDiT(cfg, rngs=nnx.Rngs(0)))
    model = materialize(graphdef, state, convert_dit(cfg, weights, flat))
    call = jax.jit(lambda m, *a, **k: m(*a, **k))  # traced per call: a monkeypatched function takes effect
    ctx = {"hidden": x["hidden"], "mask": context.get("mask", x["mask"])}
    return np.asarray(call(model, x["latents"], x["timestep"], ctx, image_embeds=context.get("image", x.get("image"))))


@pytest.fixture(scope="module")
def full():
    model, weights, cfg = build("every_stage")
    x = inputs(cfg)
    ref32, ref64 = run_reference(model, x, torch.float32), run_reference(model, x, torch.float64)
    return cfg, weights, x, ref64, fp32_tolerance(ref32, ref64)


def rel_max(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_dit_matches_diffusers(variant, full):
    if variant == "every_stage":
        cfg, weights, x, ref64, tol = full
    else:
        model, weights, cfg = build(variant)
        x = inputs(cfg)
        ref64 = run_reference(model, x, torch.float64)
        tol = fp32_tolerance(run_reference(model, x, torch.float32), ref64)
    got = run_vidax(cfg, weights, x)
    err = rel_max(got, ref64)
    print(f"motif dit {variant}: rel max err vs float64 {err:.2e} (tolerance {tol:.2e})")
    assert got.shape == ref64.shape and err <= tol


def test_what_the_bound_sees(full, monkeypatch):
    cfg, weights, x, ref64, tol = full
    wrong = {"padding unmasked": run_vidax(cfg, weights, x, mask=np.ones_like(x["mask"])),
             "no image tokens": run_vidax(cfg, weights, x, image=None)}
    with monkeypatch.context() as m:
        m.setattr(dit_lib, "_interleaved_attention", lambda a, b: (dit_lib.ulysses.self_attention(*a),
                                                                   dit_lib.ulysses.self_attention(*b)))
        wrong["decoder streams apart"] = run_vidax(cfg, weights, x)
    with monkeypatch.context() as m:
        m.setattr(dit_lib, "rotate", lambda q, rope, style="interleaved": q)
        wrong["no RoPE at all"] = run_vidax(cfg, weights, x)
    with monkeypatch.context() as m:
        def no_rope_query(self, x_, kv, rope, *, kv_mask):
            k, v = self._kv(kv, None)
            return self.out(dit_lib.ulysses.cross_attention(self._q(x_, "seq"), k, v, kv_mask=kv_mask), "seq")

        m.setattr(dit_lib.TextCrossAttention, "__call__", no_rope_query)
        wrong["cross-attention queries without RoPE"] = run_vidax(cfg, weights, x)
    for label, got in wrong.items():
        err = rel_max(got, ref64)
        print(f"motif dit, {label}: rel max err {err:.2e} vs tolerance {tol:.2e}")
        assert err > 10 * tol, label


def test_conversion_reports_every_problem(full):
    cfg, weights, _, _, _ = full
    _, _, flat = abstract_model(lambda: dit_lib.MotifDiT(cfg, rngs=nnx.Rngs(0)))
    broken = dict(weights)
    del broken["single_transformer_blocks.2.proj_out.bias"]  # the decoder block's
    broken["transformer_blocks.0.attn.extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(ConversionError) as err:
        convert_dit(cfg, broken, flat)
    assert err.value.missing == ["decoder_blocks/out_mlp/bias"]
    assert err.value.unexpected == ["transformer_blocks.0.attn.extra.weight"]


def test_configs_the_reference_cannot_run_are_refused():
    for bad, phrase in ((dict(norm_type="rms_norm"), "takes only 'layer_norm'"),
                        (dict(rope_axes_dim=(4, 4, 6)), "must sum to attention_head_dim=12"),
                        (dict(num_decoder_layers=4), "must lie in 0..num_single_layers=3")):
        with pytest.raises(ValueError, match=phrase):
            dit_lib.MotifDiTConfig.from_config({**BASE, **bad})
