"""HunyuanVideo-1.5 DiT parity against diffusers' HunyuanVideo15Transformer3DModel (torch is a test-only oracle):
text-to-video (zero image tokens) and image-to-video with padded Qwen and byT5 conditioning, the meanflow variant
with ``timestep_r``; checks that the masks, the image tokens and ``timestep_r`` each move the output; conversion
and structure."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.checks import fp32_tolerance, logical_axes  # noqa: E402
from vidax_core.testing.reference import reference_in  # noqa: E402
from vidax_hunyuan.convert_dit15 import load_dit15  # noqa: E402
from vidax_hunyuan.dit15 import HunyuanDiT15, HunyuanDiT15Config  # noqa: E402

pytestmark = pytest.mark.xdist_group("hunyuan15_dit")

# 2 latent channels: 65 = 32 + 32 + 1 at full size (noisy latent, conditioning latent, mask).
TINY = dict(in_channels=5, out_channels=2, num_attention_heads=2, attention_head_dim=16, num_layers=2,
            num_refiner_layers=2, mlp_ratio=2.0, patch_size=1, patch_size_t=1, qk_norm="rms_norm",
            text_embed_dim=12, text_embed_2_dim=10, image_embed_dim=8, rope_theta=256.0, rope_axes_dim=(4, 6, 6),
            target_size=640, task_type="i2v", use_meanflow=False)


def make_reference(tmp_dir, **over):
    """The reference with random weights, and its weights as vidax reads them: the ``save_pretrained``
    safetensors file (diffusers' own key names) through the core's reader."""
    from diffusers import HunyuanVideo15Transformer3DModel

    from vidax_core.io.safetensors import SafetensorsFile

    torch.manual_seed(0)
    cfg = dict(TINY, **over)
    model = HunyuanVideo15Transformer3DModel(**cfg).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            # 0.15 on the tiny widths; 1/sqrt(fan_in) on the byT5 projection's fixed 2048-wide layers
            p.normal_(0.0, 0.15 if p.ndim < 2 or p.shape[1] <= 64 else p.shape[1] ** -0.5)
            if "norm" in name and name.endswith("weight") and p.ndim == 1:
                p.add_(1.0)
    model.save_pretrained(tmp_dir)
    tensors = dict(SafetensorsFile(os.path.join(tmp_dir, "diffusion_pytorch_model.safetensors")))
    with open(os.path.join(tmp_dir, "config.json")) as f:
        written = json.load(f)
    return model, tensors, HunyuanDiT15Config.from_config(written)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_reference(str(tmp_path_factory.mktemp("hy15_base")))


@pytest.fixture(scope="module")
def meanflow(tmp_path_factory):
    return make_reference(str(tmp_path_factory.mktemp("hy15_meanflow")), use_meanflow=True)


@pytest.fixture(scope="module")
def patch2(tmp_path_factory):
    return make_reference(str(tmp_path_factory.mktemp("hy15_patch2")), patch_size=2)


def make_inputs(task="t2v", batch=2, frames=3, size=4, length=7, length_2=6, n_image=5, timestep_r=False):
    rng = np.random.default_rng(0)
    inp = dict(
        latents=rng.standard_normal((batch, 5, frames, size, size)).astype(np.float32),
        timestep=np.array([999.0, 250.5][:batch], np.float32),
        hidden=(2.0 * rng.standard_normal((batch, length, 12))).astype(np.float32),
        mask=np.ones((batch, length), np.int64),
        hidden_2=rng.standard_normal((batch, length_2, 10)).astype(np.float32),
        mask_2=np.ones((batch, length_2), np.int64),
        image=np.zeros((batch, n_image, 8), np.float32),
    )
    inp["mask"][0, 4:] = 0  # Qwen: first sample padded after 4 tokens
    inp["mask_2"][0, :] = 0  # byT5: no quoted text in the first prompt
    inp["mask_2"][1, 2:] = 0  # and two byT5 tokens in the second
    if task == "i2v":
        inp["image"] = rng.standard_normal((batch, n_image, 8)).astype(np.float32)
    if timestep_r:
        inp["timestep_r"] = np.array([750.0, 0.0][:batch], np.float32)
    return inp


def run_reference(model, inp, dtype=torch.float32):
    """The reference output; in float64 (sinusoids included) to measure the fp32 reference's own error."""

    def t(a):
        return torch.from_numpy(a).to(dtype)

    with reference_in(model, dtype) as m:
        out = m(t(inp["latents"]), t(inp["timestep"]), t(inp["hidden"]), torch.from_numpy(inp["mask"]),
                timestep_r=t(inp["timestep_r"]) if "timestep_r" in inp else None,
                encoder_hidden_states_2=t(inp["hidden_2"]), encoder_attention_mask_2=torch.from_numpy(inp["mask_2"]),
                image_embeds=t(inp["image"]), return_dict=False)[0]
    return out.double().numpy()


_FWD = jax.jit(lambda m, *a: m(*a))


def run_vidax(cfg, tensors, inp, drop_image=False, **ctx_over):
    model = load_dit15(cfg, tensors)
    ctx = {k: jnp.asarray(inp[k]) for k in ("hidden", "mask", "hidden_2", "mask_2", "image")}
    if drop_image:
        del ctx["image"]
    ctx.update(ctx_over)
    tr = jnp.asarray(inp["timestep_r"]) if "timestep_r" in inp else None
    return np.asarray(_FWD(model, jnp.asarray(inp["latents"]), jnp.asarray(inp["timestep"]), ctx, tr))


def _check(name, got, want32, want64):
    tol = fp32_tolerance(want32, want64)
    rel = float(np.abs(got - want32).max() / np.abs(want32).max())
    print(f"{name}: max_abs={np.abs(got - want32).max():.3e} rel(max)={rel:.3e} tol={tol:.3e} "
          f"ref fp32-vs-fp64={np.abs(want32 - want64).max() / np.abs(want64).max():.3e}")
    assert got.shape == want32.shape
    assert rel <= tol, (rel, tol)
    return tol


@pytest.mark.parametrize("variant,task", [("base", "t2v"), ("base", "i2v"), ("meanflow", "i2v"), ("patch2", "t2v")])
def test_parity_with_diffusers(variant, task, request):
    model, tensors, cfg = request.getfixturevalue(variant)
    inp = make_inputs(task, timestep_r=variant == "meanflow", size=8 if variant == "patch2" else 4)
    want32 = run_reference(model, inp)
    want64 = run_reference(model, inp, torch.float64)
    got = run_vidax(cfg, tensors, inp)
    _check(f"hunyuan15 dit {variant} {task}", got, want32, want64)


def test_meanflow_without_timestep_r(meanflow):
    """The reference embeds ``timestep`` alone when a meanflow model gets no ``timestep_r``."""
    model, tensors, cfg = meanflow
    inp = make_inputs("i2v")
    want32, want64 = run_reference(model, inp), run_reference(model, inp, torch.float64)
    _check("hunyuan15 dit meanflow, no timestep_r", run_vidax(cfg, tensors, inp), want32, want64)


def test_t2v_without_image_tokens(base):
    """Leaving the (all-zero, masked) image tokens out gives the reference's text-to-video output."""
    model, tensors, cfg = base
    inp = make_inputs("t2v")
    want32, want64 = run_reference(model, inp), run_reference(model, inp, torch.float64)
    _check("hunyuan15 dit t2v, no image tokens", run_vidax(cfg, tensors, inp, drop_image=True), want32, want64)


def _moved(got, want, tol, sample=None):
    g, w = (got, want) if sample is None else (got[sample], want[sample])
    return float(np.abs(g - w).max() / np.abs(w).max()) > 100 * tol


def test_each_input_matters(base, meanflow):
    """Unmasking padded Qwen or byT5 tokens, dropping the image tokens of I2V, or dropping ``timestep_r`` each moves
    the output far past the parity tolerance (only for the samples they touch): the parity above can see them."""
    model, tensors, cfg = base
    inp = make_inputs("i2v")
    want32, want64 = run_reference(model, inp), run_reference(model, inp, torch.float64)
    tol = fp32_tolerance(want32, want64)
    got = run_vidax(cfg, tensors, inp, mask=jnp.ones_like(jnp.asarray(inp["mask"])))
    assert _moved(got, want32, tol, 0) and not _moved(got, want32, tol / 100, 1)  # Qwen padding on sample 0 only
    got = run_vidax(cfg, tensors, inp, mask_2=jnp.ones_like(jnp.asarray(inp["mask_2"])))
    assert _moved(got, want32, tol, 0) and _moved(got, want32, tol, 1)
    assert _moved(run_vidax(cfg, tensors, inp, drop_image=True), want32, tol)

    model, tensors, cfg = meanflow
    inp = make_inputs("i2v", timestep_r=True)
    want32, want64 = run_reference(model, inp), run_reference(model, inp, torch.float64)
    no_r = {k: v for k, v in inp.items() if k != "timestep_r"}
    assert _moved(run_vidax(cfg, tensors, no_r), want32, fp32_tolerance(want32, want64))


def test_reorder_matters(base):
    """Valid byT5 tokens left behind padded ones (no reorder) would break the prefix key mask: with the mask taken
    as a prefix of the unsorted stream, the output moves."""
    from vidax_hunyuan import dit15

    model, tensors, cfg = base
    inp = make_inputs("i2v")
    want32, want64 = run_reference(model, inp), run_reference(model, inp, torch.float64)
    saved = dit15.valid_first
    dit15.valid_first = lambda tokens, valid: (tokens, jnp.arange(valid.shape[1])[None] < valid.sum(1)[:, None])
    try:
        got = np.asarray(jax.jit(lambda m, *a: m(*a))(load_dit15(cfg, tensors), jnp.asarray(inp["latents"]),
                                                      jnp.asarray(inp["timestep"]),
                                                      {k: jnp.asarray(inp[k]) for k in
                                                       ("hidden", "mask", "hidden_2", "mask_2", "image")}))
    finally:
        dit15.valid_first = saved
    assert _moved(got, want32, fp32_tolerance(want32, want64))


def test_timestep_r_needs_meanflow(base):
    _, tensors, cfg = base
    inp = make_inputs("i2v", timestep_r=True)
    with pytest.raises(ValueError, match="use_meanflow"):
        run_vidax(cfg, tensors, inp)


def test_conversion_reports_problems(meanflow):
    _, tensors, cfg = meanflow
    broken = dict(tensors)
    del broken["time_embed.timestep_embedder_r.linear_2.bias"]
    del broken["transformer_blocks.1.attn.norm_added_k.weight"]
    broken["single_transformer_blocks.0.linear1.weight"] = np.zeros((3, 3), np.float32)
    broken["cond_type_embed.weight"] = np.zeros((2, 32), np.float32)
    with pytest.raises(ConversionError) as exc:
        load_dit15(cfg, broken)
    assert "timestep_embedder_r/linear_2/bias" in exc.value.missing
    assert any(m.startswith("double_blocks/txt/norm_k/scale layers [1]") for m in exc.value.missing)
    assert exc.value.unexpected == ["single_transformer_blocks.0.linear1.weight"]
    assert len(exc.value.mismatched) == 1 and exc.value.mismatched[0].startswith("cond_type_embed.weight (2, 32)")
    with pytest.raises(ConversionError) as exc:  # meanflow weights into a model without them
        load_dit15(HunyuanDiT15Config.from_config(TINY), tensors)
    assert sorted(exc.value.unexpected)[0].startswith("time_embed.timestep_embedder_r.linear_1.bias")


def test_structure_and_logical_axes(meanflow):
    _, _, cfg = meanflow
    specs, flat = logical_axes(lambda: HunyuanDiT15(cfg, rngs=nnx.Rngs(0)))
    assert specs[("double_blocks", "img", "q", "kernel")] == ("layers", "embed", "heads")
    assert specs[("double_blocks", "txt_out", "kernel")] == ("layers", "heads", "embed")
    assert specs[("double_blocks", "ff", "proj_in", "kernel")] == ("layers", "embed", "mlp")
    assert specs[("double_blocks", "norm1", "linear", "kernel")] == ("layers", None, "mod")
    assert specs[("cond_type_embed",)] == (None, "embed")
    assert flat[("double_blocks", "img", "q", "kernel")].shape[0] == 2
    assert not any(p[0] != "double_blocks" and specs[p] and specs[p][0] == "layers" for p in specs)
    assert all(specs[p] is not None and len(specs[p]) == len(flat[p].shape) for p in specs), "unnamed axes"
    assert HunyuanDiT15.block_groups == ("double_blocks",)


# diffusers name prefix -> original release name prefix, written from diffusers'
# scripts/convert_hunyuan_video1_5_to_diffusers.py (read backwards) and the release's ``time_r_in`` embedder.
TO_ORIGINAL = [
    ("time_embed.timestep_embedder_r.linear_1.", "time_r_in.mlp.0."),
    ("time_embed.timestep_embedder_r.linear_2.", "time_r_in.mlp.2."),
    ("time_embed.timestep_embedder.linear_1.", "time_in.mlp.0."),
    ("time_embed.timestep_embedder.linear_2.", "time_in.mlp.2."),
    ("context_embedder.time_text_embed.timestep_embedder.linear_1.", "txt_in.t_embedder.mlp.0."),
    ("context_embedder.time_text_embed.timestep_embedder.linear_2.", "txt_in.t_embedder.mlp.2."),
    ("context_embedder.time_text_embed.text_embedder.", "txt_in.c_embedder."),
    ("context_embedder.proj_in.", "txt_in.input_embedder."),
    ("context_embedder.token_refiner.refiner_blocks.", "txt_in.individual_token_refiner.blocks."),
    ("context_embedder_2.norm.", "byt5_in.layernorm."),
    ("context_embedder_2.linear_", "byt5_in.fc"),
    ("image_embedder.norm_in.", "vision_in.proj.0."),
    ("image_embedder.linear_1.", "vision_in.proj.1."),
    ("image_embedder.linear_2.", "vision_in.proj.3."),
    ("image_embedder.norm_out.", "vision_in.proj.4."),
    ("x_embedder.proj.", "img_in.proj."),
    ("cond_type_embed.", "cond_type_embedding."),
    ("norm_out.linear.", "final_layer.adaLN_modulation.1."),
    ("proj_out.", "final_layer.linear."),
    ("transformer_blocks.", "double_blocks."),
]
BLOCK_TO_ORIGINAL = [
    ("norm1.linear.", "img_mod.linear."), ("norm1_context.linear.", "txt_mod.linear."),
    ("attn.to_q.", "img_attn_q."), ("attn.to_k.", "img_attn_k."), ("attn.to_v.", "img_attn_v."),
    ("attn.norm_q.", "img_attn_q_norm."), ("attn.norm_k.", "img_attn_k_norm."), ("attn.to_out.0.", "img_attn_proj."),
    ("attn.add_q_proj.", "txt_attn_q."), ("attn.add_k_proj.", "txt_attn_k."), ("attn.add_v_proj.", "txt_attn_v."),
    ("attn.norm_added_q.", "txt_attn_q_norm."), ("attn.norm_added_k.", "txt_attn_k_norm."),
    ("attn.to_add_out.", "txt_attn_proj."), ("ff.net.0.proj.", "img_mlp.fc1."), ("ff.net.2.", "img_mlp.fc2."),
    ("ff_context.net.0.proj.", "txt_mlp.fc1."), ("ff_context.net.2.", "txt_mlp.fc2."),
]
REFINER_TO_ORIGINAL = [("attn.to_out.0.", "self_attn_proj."), ("ff.net.0.proj.", "mlp.fc1."),
                       ("ff.net.2.", "mlp.fc2."), ("norm_out.linear.", "adaLN_modulation.1.")]


def to_original(tensors):
    """The original-release state dict of diffusers-named ``tensors`` (values: arrays or shape stand-ins)."""
    out, qkv = {}, {}
    for key, v in tensors.items():
        new = key
        for a, b in TO_ORIGINAL:
            if new.startswith(a):
                new = b + new[len(a):]
                break
        head, sep, rest = new.partition(".")
        if head in ("double_blocks",) or new.startswith("txt_in.individual_token_refiner.blocks."):
            pre = new[:new.index(".", len("txt_in.individual_token_refiner.blocks.") if head == "txt_in"
                                 else len("double_blocks.")) + 1]
            tail = new[len(pre):]
            table = BLOCK_TO_ORIGINAL if head == "double_blocks" else REFINER_TO_ORIGINAL
            for a, b in table:
                if tail.startswith(a):
                    tail = b + tail[len(a):]
                    break
            if head == "txt_in" and tail.startswith(("attn.to_q.", "attn.to_k.", "attn.to_v.")):
                qkv.setdefault(pre + "self_attn_qkv." + tail.rsplit(".", 1)[1], {})[tail[8]] = v
                continue
            new = pre + tail
        if new.startswith("final_layer.adaLN_modulation.1."):
            scale, shift = np.split(np.asarray(v), 2, axis=0)
            v = np.concatenate([shift, scale], axis=0)  # the release stores (shift, scale)
        out[new] = v
    for key, parts in qkv.items():
        out[key] = np.concatenate([np.asarray(parts[p]) for p in "qkv"], axis=0)
    return out


@pytest.mark.parametrize("variant", ["base", "meanflow"])
def test_original_layout_loads_to_the_diffusers_params(variant, request):
    """The release's layout, through :class:`OriginalDiT15`, fills every parameter with exactly the values the
    diffusers twin gives (split refiner q/k/v, (shift, scale) final AdaLN, renamed embedders)."""
    from vidax_core.nn.state import flat_state
    from vidax_core.errors import UserError
    from vidax_hunyuan.original_dit15 import OriginalDiT15, dit15_config

    _, tensors, cfg = request.getfixturevalue(variant)
    original = to_original(tensors)
    assert "txt_in.individual_token_refiner.blocks.0.self_attn_qkv.weight" in original
    assert not any(k.startswith(("transformer_blocks", "context_embedder", "time_embed")) for k in original)
    want = flat_state(load_dit15(cfg, tensors))
    got = flat_state(load_dit15(cfg, OriginalDiT15(original)))
    assert set(got) == set(want)
    for path in want:
        np.testing.assert_array_equal(np.asarray(got[path]), np.asarray(want[path]), err_msg=str(path))
    over = {"rope_axes_dim": list(cfg.rope_axes_dim)}  # the release's are fixed at [16, 56, 56]
    assert HunyuanDiT15Config.from_config(dit15_config(OriginalDiT15(original), "480p_i2v", over)) == cfg
    with pytest.raises(UserError, match="480p"):
        dit15_config(OriginalDiT15(original), "1080p_t2v")
    swapped = dict(original)
    w = swapped["final_layer.adaLN_modulation.1.weight"]
    swapped["final_layer.adaLN_modulation.1.weight"] = np.concatenate(np.split(w, 2)[::-1])  # no swap: differs
    got = flat_state(load_dit15(cfg, OriginalDiT15(swapped)))
    assert not np.array_equal(np.asarray(got[("norm_out", "linear", "kernel")]),
                              np.asarray(want[("norm_out", "linear", "kernel")]))


def test_staged_forward_in_slices(meanflow):
    """pre -> one-layer slices of ``double_blocks`` -> post (what the offload executor runs) is the whole call."""
    _, tensors, cfg = meanflow
    inp = make_inputs("i2v", timestep_r=True)
    model = load_dit15(cfg, tensors)
    ctx = {k: jnp.asarray(inp[k]) for k in ("hidden", "mask", "hidden_2", "mask_2", "image")}
    args = (jnp.asarray(inp["latents"]), jnp.asarray(inp["timestep"]), ctx, jnp.asarray(inp["timestep_r"]))
    whole = np.asarray(model(*args))
    x, aux = model.pre(*args)
    graphdef, state = nnx.split(model.double_blocks)
    for lo in range(cfg.num_layers):
        x = HunyuanDiT15.run_block_group("double_blocks", graphdef, jax.tree.map(lambda a: a[lo:lo + 1], state), x, aux)
    staged = np.asarray(model.post(x, aux, inp["latents"].shape))
    np.testing.assert_allclose(staged, whole, rtol=0, atol=1e-6 * np.abs(whole).max())
    with pytest.raises(KeyError):
        HunyuanDiT15.run_block_group("single_blocks", graphdef, state, x, aux)
