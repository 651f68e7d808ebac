"""Wan DiT parity against diffusers' WanTransformer3DModel (torch is a test-only oracle), conversion and structure."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.nn.state import abstract_model, flat_state  # noqa: E402
from vidax_wan.convert_dit import DIT_RULES, load_dit  # noqa: E402
from vidax_wan.dit import WanDiT, WanDiTConfig, run_blocks  # noqa: E402
from vidax_core.testing.tiny.wan import TINY_DIT_CONFIG  # noqa: E402

TINY = dict(_class_name="WanTransformer3DModel", _diffusers_version="0.42.1", **TINY_DIT_CONFIG)


@pytest.fixture(scope="module")
def reference():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    kwargs = {k: v for k, v in TINY.items() if not k.startswith("_")}
    kwargs["patch_size"] = tuple(kwargs["patch_size"])
    model = WanTransformer3DModel(**kwargs).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.1)
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)  # keep norm gammas around 1 but not exactly 1
    tensors = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return model, tensors


@pytest.fixture(scope="module")
def cfg():
    return WanDiTConfig.from_config(TINY)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 4, 3, 8, 8)).astype(np.float32)
    timestep = np.array([999.0, 250.5], np.float32)
    context = rng.standard_normal((2, 7, 16)).astype(np.float32)
    return latents, timestep, context


def test_config_from_diffusers_dict(cfg):
    assert cfg.patch_size == (1, 2, 2)
    assert cfg.dim == 24 and cfg.rope_dims == (4, 4, 4)
    assert cfg.dtype == jnp.float32
    with pytest.raises(Exception):
        cfg.num_layers = 3  # frozen


def test_parity_with_diffusers(reference, cfg, inputs):
    model_t, tensors = reference
    latents, timestep, context = inputs
    with torch.no_grad():
        want = model_t(
            torch.from_numpy(latents), torch.from_numpy(timestep), torch.from_numpy(context), return_dict=False
        )[0].numpy()

    model = load_dit(cfg, tensors)
    fwd = jax.jit(lambda m, *a: m(*a))
    got = np.asarray(fwd(model, jnp.asarray(latents), jnp.asarray(timestep), jnp.asarray(context)))
    assert got.shape == want.shape == (2, 4, 3, 8, 8)
    assert got.dtype == np.float32
    max_abs = float(np.max(np.abs(got - want)))
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"wan dit parity: max_abs={max_abs:.3e} rel={rel:.3e} (|ref|max={np.abs(want).max():.3f})")
    assert max_abs <= 1e-5, max_abs
    assert rel <= 1e-5, rel


def test_conversion_reports_missing_and_unexpected(reference, cfg):
    _, tensors = reference
    broken = dict(tensors)
    del broken["blocks.1.attn2.norm_k.weight"]
    del broken["proj_out.bias"]
    broken["blocks.0.attn1.to_qkv.weight"] = np.zeros((72, 24), np.float32)
    with pytest.raises(ConversionError) as exc:
        load_dit(cfg, broken)
    err = exc.value
    assert "proj_out/bias" in err.missing
    assert any(m.startswith("blocks/attn2/norm_k/scale layers [1]") for m in err.missing)
    assert err.unexpected == ["blocks.0.attn1.to_qkv.weight"]
    assert "missing" in str(err) and "unexpected" in str(err)


def test_every_param_has_a_rule(reference, cfg):
    _, tensors = reference
    _, _, flat = abstract_model(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
    hit = set()
    for key in tensors:
        for rule in DIT_RULES:
            m = rule.match(key)
            if m is not None:
                hit.add(m[0])
                break
        else:
            raise AssertionError(f"no rule for {key}")
    assert hit == set(flat)


def test_stacked_layers_and_logical_axes(cfg):
    _, abstract_state, flat = abstract_model(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
    block_paths = [p for p in flat if p[0] == "blocks"]
    assert block_paths
    for p in block_paths:
        assert flat[p].shape[0] == cfg.num_layers, p
    specs = {tuple(p): v.get_metadata().get("out_sharding") for p, v in nnx.to_flat_state(abstract_state)}
    assert specs[("blocks", "attn1", "to_q", "kernel")] == ("layers", "embed", "heads")
    assert specs[("blocks", "attn1", "to_out", "kernel")] == ("layers", "heads", "embed")
    assert specs[("blocks", "ffn", "proj_in", "kernel")] == ("layers", "embed", "mlp")
    assert specs[("blocks", "ffn", "proj_out", "bias")] == ("layers", "embed")
    assert specs[("blocks", "attn2", "norm_q", "scale")] == ("layers", "heads")
    for p, names in specs.items():
        assert names is not None and len(names) == len(flat[p].shape), p
    pspecs = nnx.get_partition_spec(abstract_state)  # usable for sharding later
    assert tuple(pspecs["blocks"]["attn1"]["to_q"]["kernel"].get_value()) == ("layers", "embed", "heads")


def test_materialize_keeps_metadata_and_run_blocks_slices(reference, cfg, inputs):
    _, tensors = reference
    model = load_dit(cfg, tensors)
    for path, v in nnx.to_flat_state(nnx.state(model)):
        assert v.get_metadata().get("out_sharding") is not None, path
    assert flat_state(model)[("blocks", "attn1", "to_q", "kernel")].shape == (2, 24, 24)
    latents, timestep, context = (jnp.asarray(a) for a in inputs)

    @jax.jit
    def full_and_sliced(model, latents, timestep, context):
        full = model(latents, timestep, context)
        # Same result when the stacked blocks are run one slice at a time (as an offload executor would).
        x, ctx, temb, tproj, rope, grid = model.embed(latents, timestep, context)
        graphdef, state = model.split_blocks()
        for i in range(cfg.num_layers):
            layer = jax.tree.map(lambda a: a[i : i + 1], state)
            x = run_blocks(graphdef, layer, x, ctx, tproj, rope)
        return full, model.head(x, temb, grid)

    full, sliced = full_and_sliced(model, latents, timestep, context)
    np.testing.assert_allclose(np.asarray(sliced), np.asarray(full), atol=1e-6, rtol=0)


def test_jit_does_not_recompile_on_new_timesteps(reference, cfg, inputs):
    _, tensors = reference
    model = load_dit(cfg, tensors)
    graphdef, state = nnx.split(model)
    traces = []

    @jax.jit
    def fwd(state, latents, t, ctx):
        traces.append(1)
        return nnx.merge(graphdef, state)(latents, t, ctx)

    latents, timestep, context = (jnp.asarray(a) for a in inputs)
    a = fwd(state, latents, timestep, context)
    b = fwd(state, latents, timestep * 0.5, context)
    assert len(traces) == 1
    assert not np.allclose(np.asarray(a), np.asarray(b))
