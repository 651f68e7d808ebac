"""Kandinsky 5 DiT parity against diffusers' ``Kandinsky5Transformer3DModel`` (torch is a test-only oracle), with
the reference's bfloat16 rounding of q/k after RoPE.

The rounding is reproduced exactly: q and k after RoPE equal the reference's bit for bit except where the two
float32 computations before it straddle a bfloat16 rounding boundary (about one element in a thousand here), and without
the rounding almost none would. That also sets the whole-model tolerance: a one-ulp change of any float input
flips a few roundings, each moving the output by a bfloat16 ulp of one attention logit. So the bound is derived
from both implementations' own sensitivity, not guessed: each runs again with every float input and weight moved
one float32 ulp in a seeded random direction, and vidax may differ from the reference by at most ``FP32_FACTOR`` x
the larger of the two moves (relative L2, which counts the flips by their number rather than by the worst one).
diffusers' float64 run is no oracle here: its norms call ``.float()``, its RoPE ``.to(torch.float32)``, and it
rounds q/k to bfloat16 as well.

The bound can fail: vidax without the rounding, and vidax with the RoPE scale of another size, each land past it.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import abstract_model, convert, materialize  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.parity import FP32_FACTOR, move_one_ulp, rel_l2  # noqa: E402
from vidax_core.testing.reference import block_masked_flex, randomize_, state_arrays  # noqa: E402
from vidax_kandinsky import dit as dit_lib  # noqa: E402
from vidax_kandinsky.convert_dit import DIT_RULES  # noqa: E402
from vidax_kandinsky.tiny import TINY_DIT  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky_dit")

GRID = (3, 8, 12)  # latent frames, height, width: 3 x 4 x 6 patches
TEXT = 7
SCALE = (1.0, 3.16, 3.16)


@pytest.fixture(scope="module")
def reference():
    from diffusers import Kandinsky5Transformer3DModel

    torch.manual_seed(0)
    model = Kandinsky5Transformer3DModel(**TINY_DIT).eval().float()
    randomize_(model, 3, 0.15)
    return model, state_arrays(model), dit_lib.KandinskyDiTConfig.from_config(dict(model.config))


def inputs(cfg, batch: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"latents": rng.standard_normal((batch, *GRID, cfg.in_channels)).astype(np.float32),
            "timestep": np.array([937.5, 250.0][:batch], np.float32),
            "hidden": rng.standard_normal((batch, TEXT, cfg.in_text_dim)).astype(np.float32),
            "pooled": rng.standard_normal((batch, cfg.in_text_dim2)).astype(np.float32)}


def run_reference(model, weights, x, scale=SCALE) -> np.ndarray:
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    f, h, w = GRID

    def t(k):
        return torch.from_numpy(x[k])

    with torch.no_grad():
        out = model(hidden_states=t("latents"), encoder_hidden_states=t("hidden"), timestep=t("timestep"),
                    pooled_projections=t("pooled"), scale_factor=scale, text_rope_pos=torch.arange(TEXT),
                    visual_rope_pos=[torch.arange(f), torch.arange(h // 2), torch.arange(w // 2)],
                    return_dict=False)
    return out.numpy()


def run_vidax(cfg, weights, x, scale=SCALE) -> np.ndarray:
    graphdef, state, flat = abstract_model(lambda: dit_lib.KandinskyDiT(cfg, rngs=nnx.Rngs(0)))
    model = materialize(graphdef, state, convert(weights, DIT_RULES, flat, component="transformer"))
    sf = np.tile(np.float32(scale), (x["latents"].shape[0], 1))
    call = jax.jit(lambda m, *a: m(*a))  # traced per call: a monkeypatched module function takes effect
    return np.asarray(call(model, x["latents"], x["timestep"], {"hidden": x["hidden"], "pooled": x["pooled"]}, sf))


@pytest.fixture(scope="module")
def measured(reference):
    """(inputs, vidax out, reference out, the bound): the bound is FP32_FACTOR x the larger relative move of the
    two implementations under a one-ulp change of every float input and weight."""
    model, weights, cfg = reference
    x = inputs(cfg)
    ref, got = run_reference(model, weights, x), run_vidax(cfg, weights, x)
    moved = move_one_ulp((weights, x))
    moves = rel_l2(run_reference(model, *moved), ref), rel_l2(run_vidax(cfg, *moved), got)
    print(f"kandinsky dit: one-ulp moves: reference {moves[0]:.3e}, vidax {moves[1]:.3e}")
    return x, got, ref, FP32_FACTOR * max(moves)


def test_dit_matches_diffusers(measured):
    _, got, ref, bound = measured
    print(f"kandinsky dit vs diffusers: rel {rel_l2(got, ref):.3e}, bound {bound:.3e}")
    assert got.shape == ref.shape and rel_l2(got, ref) <= bound


def test_bf16_rounding_and_rope_scale_matter(reference, measured, monkeypatch):
    """vidax without the reference's bfloat16 rounding of q/k, or with the 480p RoPE scale, lands past the bound."""
    model, weights, cfg = reference
    x, _, ref, bound = measured
    wrong_scale = run_vidax(cfg, weights, x, scale=(1.0, 2.0, 2.0))
    monkeypatch.setattr(dit_lib, "bf16_round", lambda a: a)
    unrounded = run_vidax(cfg, weights, x)
    for name, wrong in (("no bf16 rounding", unrounded), ("480p rope scale", wrong_scale)):
        print(f"kandinsky dit, {name}: rel {rel_l2(wrong, ref):.3e} vs bound {bound:.3e}")
        assert rel_l2(wrong, ref) > 2 * bound, name


def captured_qk(model, weights, x) -> list:
    """The reference's (query, key) handed to each attention call (text block 0 first, then text block 1, then
    per visual block its self-attention and its cross-attention)."""
    from diffusers.models.transformers import transformer_kandinsky as tk

    seen, dispatch = [], tk.dispatch_attention_fn

    def record(query, key, value, **kw):
        seen.append((query.numpy().copy(), key.numpy().copy()))
        return dispatch(query, key, value, **kw)

    tk.dispatch_attention_fn = record
    try:
        run_reference(model, weights, x)
    finally:
        tk.dispatch_attention_fn = dispatch
    return seen


def vidax_qk(cfg, weights, x) -> dict:
    """vidax's q and k after RoPE of text block 0 and of visual block 0's self-attention."""
    from vidax_core.nn.adaln import split_modulation

    graphdef, state, flat = abstract_model(lambda: dit_lib.KandinskyDiT(cfg, rngs=nnx.Rngs(0)))
    model = materialize(graphdef, state, convert(weights, DIT_RULES, flat, component="transformer"))
    (vid, txt), aux = model.pre(x["latents"], x["timestep"], {"hidden": x["hidden"], "pooled": x["pooled"]},
                                np.tile(np.float32(SCALE), (2, 1)))
    out = {}
    for name, stream, rope, seq in (("text", txt, aux["text_rope"], None), ("visual", vid, aux["visual_rope"], "seq")):
        group = model.text_blocks if name == "text" else model.visual_blocks
        gd, st = nnx.split(group)
        block = nnx.merge(gd, jax.tree.map(lambda a: a[0], st))
        mod = block.text_modulation if name == "text" else block.visual_modulation
        shift, scale = split_modulation(mod(jax.nn.silu(aux["temb"])), 6 if name == "text" else 9)[:2]
        q, k, _ = block.self_attention.qkv(dit_lib.normed(stream, shift, scale, cfg.dtype), seq, rope)
        out[name] = (np.asarray(q), np.asarray(k))
    return out


def test_qk_rounding_reproduced_bit_for_bit(reference):
    model, weights, cfg = reference
    x = inputs(cfg)
    theirs = captured_qk(model, weights, x)
    ours = vidax_qk(cfg, weights, x)
    for name, index in (("text", 0), ("visual", 2)):
        for which, a, b in zip("qk", ours[name], theirs[index]):
            same = float(np.mean(a == b))
            print(f"kandinsky {name} block 0 {which} after RoPE: {same:.5f} of the elements equal bit for bit")
            assert a.shape == b.shape and same > 0.995, (name, which, same)
    # without the rounding (the fp32 rotation), almost no element equals the reference's rounded value
    saved = dit_lib.bf16_round
    dit_lib.bf16_round = lambda a: a
    try:
        plain = vidax_qk(cfg, weights, x)
    finally:
        dit_lib.bf16_round = saved
    assert float(np.mean(plain["text"][0] == theirs[0][0])) < 0.05


def test_conversion_reports_problems(reference):
    _, weights, cfg = reference
    broken = dict(weights)
    del broken["visual_transformer_blocks.1.cross_attention.key_norm.weight"]
    broken["text_transformer_blocks.0.feed_forward.in_layer.bias"] = np.zeros(3, np.float32)
    _, _, flat = abstract_model(lambda: dit_lib.KandinskyDiT(cfg, rngs=nnx.Rngs(0)))
    with pytest.raises(ConversionError) as exc:
        convert(broken, DIT_RULES, flat, component="transformer")
    assert any(m.startswith("visual_blocks/cross_attention/norm_k/scale layers [1]") for m in exc.value.missing)
    assert exc.value.unexpected == ["text_transformer_blocks.0.feed_forward.in_layer.bias"]


NABLA = dict(attention_type="nabla", attention_P=0.6, attention_wT=1, attention_wH=1, attention_wW=1,
             attention_add_sta=True, attention_method="topcdf")
NABLA_GRID = (2, 32, 48)  # latent frames, height, width: 2 x 16 x 24 patches = 2 x 2 x 3 NABLA blocks of 64 tokens


def block_masked_reference(model, weights, x):
    """diffusers' forward with its NABLA sparse params (``get_sparse_params`` of the pipeline) and the BlockMask
    applied as the flex kernel applies it: attention over the kept (query block, key block) pairs only. (On CPU
    without torch.compile, flex_attention's eager fallback ignores the block structure and attends densely, so
    the reference's own call would be dense attention.)"""
    from types import SimpleNamespace

    from diffusers import Kandinsky5T2VPipeline
    from diffusers.models.transformers import transformer_kandinsky as tk

    pipe = SimpleNamespace(transformer=model, fast_sta_nabla=Kandinsky5T2VPipeline.fast_sta_nabla)
    sparse = Kandinsky5T2VPipeline.get_sparse_params(pipe, torch.from_numpy(x["latents"]), "cpu")
    f, h, w = NABLA_GRID
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    with block_masked_flex(tk), torch.no_grad():
        out = model(hidden_states=torch.from_numpy(x["latents"]), encoder_hidden_states=torch.from_numpy(x["hidden"]),
                    timestep=torch.from_numpy(x["timestep"]), pooled_projections=torch.from_numpy(x["pooled"]),
                    scale_factor=SCALE, text_rope_pos=torch.arange(TEXT), sparse_params=sparse,
                    visual_rope_pos=[torch.arange(f), torch.arange(h // 2), torch.arange(w // 2)],
                    return_dict=False)
    return out.numpy()


def test_nabla_dit_matches_the_block_masked_reference():
    """A NABLA checkpoint (fractal token order, the top-CDF block mask OR the STA window, block-sparse attention):
    within the derived bound of the reference; the same model with dense attention lands far past it."""
    from diffusers import Kandinsky5Transformer3DModel

    torch.manual_seed(0)
    model = Kandinsky5Transformer3DModel(**{**TINY_DIT, **NABLA}).eval().float()
    randomize_(model, 3, 0.15)
    weights = state_arrays(model)
    cfg = dit_lib.KandinskyDiTConfig.from_config(dict(model.config))
    rng = np.random.default_rng(1)
    x = {"latents": rng.standard_normal((1, *NABLA_GRID, cfg.in_channels)).astype(np.float32),
         "timestep": np.array([700.0], np.float32),
         "hidden": rng.standard_normal((1, TEXT, cfg.in_text_dim)).astype(np.float32),
         "pooled": rng.standard_normal((1, cfg.in_text_dim2)).astype(np.float32)}
    ref, got = block_masked_reference(model, weights, x), run_vidax(cfg, weights, x)
    moved = move_one_ulp((weights, x))
    bound = FP32_FACTOR * max(rel_l2(block_masked_reference(model, *moved), ref), rel_l2(run_vidax(cfg, *moved), got))
    dense = run_vidax(dit_lib.KandinskyDiTConfig.from_config({**dict(model.config), "attention_type": "regular"}),
                      weights, x)
    print(f"kandinsky nabla dit vs block-masked reference: rel {rel_l2(got, ref):.3e}, bound {bound:.3e}; dense "
          f"attention {rel_l2(dense, ref):.3e}")
    assert rel_l2(got, ref) <= bound < rel_l2(dense, ref) / 10
