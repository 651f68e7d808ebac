"""Cosmos3 DiT parity against diffusers' ``Cosmos3OmniTransformer`` (torch is a test-only oracle), called as
``Cosmos3OmniPipeline`` calls it: the pipeline's own text/vision segment builders make the positions, and each
guidance branch is one reference call. vidax runs both branches (prompts of different lengths, so different video
offsets) as one right-padded batch. Tiny Nano-style (SwiGLU, q/k norms on both streams, GQA 4/2, biases) and
Edge-style (relu^2, Nemotron norms, ``k_norm_und_for_gen``, q width != hidden, odd latent width, an image-conditioned
first frame) configs; every parameter randomised; weights read back from ``save_pretrained`` safetensors.
Tolerance: the kit's :func:`fp32_tolerance` (the reference's own fp32-vs-fp64 error times 8)."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.io.safetensors import SafetensorsFile  # noqa: E402
from vidax_core.testing.checks import fp32_tolerance  # noqa: E402
from vidax_cosmos.convert_cosmos3 import load_cosmos3_dit  # noqa: E402
from vidax_cosmos.cosmos3_dit import Cosmos3DiTConfig  # noqa: E402

pytestmark = pytest.mark.xdist_group("cosmos3_dit")

_COMMON = dict(head_dim=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, latent_channel=4,
               latent_patch_size=2, patch_latent_dim=16, vocab_size=64, rope_scaling={"mrope_section": [4, 2, 2]},
               base_fps=24, enable_fps_modulation=True, unified_3d_mrope_reset_spatial_ids=True,
               unified_3d_mrope_temporal_modality_margin=15000, timestep_scale=0.001)
NANO = dict(_COMMON, hidden_size=64, intermediate_size=96, attention_bias=True, rms_norm_eps=1e-6,
            rope_theta=5000000.0, hidden_act="silu", qk_norm_for_text=True, use_und_k_norm_for_gen=False)
EDGE = dict(_COMMON, hidden_size=48, intermediate_size=80, attention_bias=False, rms_norm_eps=1e-5,
            rope_theta=100000000.0, hidden_act="relu2", qk_norm_for_text=False, use_und_k_norm_for_gen=True)
# (config, latent (T, H, W), fps, conditioning frames, timestep)
CASES = {"nano": (NANO, (3, 4, 6), 16.0, [], 700.0), "edge": (EDGE, (3, 4, 5), 24.0, [0], 350.0)}
PROMPTS = ([5, 9, 13, 2, 40, 7, 33], [11, 3, 60, 21])  # cond / uncond token ids: 7 and 4 tokens


def _reference(kind, tmp_path_factory):
    from diffusers import Cosmos3OmniTransformer

    cfg = CASES[kind][0]
    torch.manual_seed(0)
    model = Cosmos3OmniTransformer(**cfg).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.2 if "norm" in name else 0.3
            base = 1.0 if "norm" in name else 0.0
            p.copy_(base + scale * torch.randn(p.shape, generator=g))
    folder = tmp_path_factory.mktemp(f"cosmos3_{kind}")
    model.save_pretrained(folder, safe_serialization=True)
    tensors = SafetensorsFile(str(folder / "diffusion_pytorch_model.safetensors"))
    return model, tensors


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    kind = request.param
    model, tensors = _reference(kind, tmp_path_factory)
    cfg, (t, h, w), fps, cond, step = CASES[kind]
    latents = np.random.default_rng(2).standard_normal((1, cfg["latent_channel"], t, h, w)).astype(np.float32)
    return kind, model, tensors, latents, fps, cond, step


def _call_reference(model, latents, ids, fps, cond, step, dtype):
    """One guidance branch exactly as Cosmos3OmniPipeline.__call__ packs it."""
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import Cosmos3OmniPipeline as P

    model = model.to(dtype)
    pipe = types.SimpleNamespace(transformer=model, vae_scale_factor_temporal=4)
    x = torch.from_numpy(latents).to(dtype)
    text = P._prepare_text_segment(pipe, ids, "cpu")
    vis = P._prepare_vision_segment(pipe, x, has_image_condition=bool(cond),
                                    mrope_offset=text["vision_start_temporal_offset"], vision_fps=fps,
                                    curr=text["und_len"], device="cpu", condition_frame_indexes=cond or None)
    with torch.no_grad():
        out = model(input_ids=text["input_ids"], text_indexes=text["text_indexes"],
                    position_ids=torch.cat([text["text_mrope_ids"], vis["vision_mrope_ids"]], dim=1),
                    und_len=text["und_len"], sequence_length=text["und_len"] + vis["num_vision_tokens"],
                    vision_tokens=[x], vision_token_shapes=vis["vision_token_shapes"],
                    vision_sequence_indexes=vis["vision_sequence_indexes"],
                    vision_mse_loss_indexes=vis["vision_mse_loss_indexes"],
                    vision_timesteps=torch.full((vis["num_noisy_vision_tokens"],), step),
                    vision_noisy_frame_indexes=vis["vision_noisy_frame_indexes"], return_dict=False)[0][0]
    model.to(torch.float32)
    return out.double().numpy()[0]


def _batch(latents, cond, lengths=None):
    n = max(len(p) for p in PROMPTS)
    ids = np.zeros((2, n), np.int32)
    for i, p in enumerate(PROMPTS):
        ids[i, :len(p)] = p
    lengths = np.array([len(p) for p in PROMPTS], np.int32) if lengths is None else np.asarray(lengths, np.int32)
    noisy = np.ones((2, latents.shape[2]), np.float32)
    noisy[:, cond] = 0.0
    return np.concatenate([latents, latents]), ids, lengths, noisy


_RUNNERS: dict = {}


def _runner(kind, tensors):
    """The loaded vidax model and one jitted forward per case (fps static), built once."""
    if kind not in _RUNNERS:
        model = load_cosmos3_dit(Cosmos3DiTConfig.from_config(CASES[kind][0]), tensors)
        fwd = jax.jit(lambda m, x, t, i, n, f, fps: m(x, t, i, text_lengths=n, noisy_frames=f, fps=fps),
                      static_argnames="fps")
        _RUNNERS[kind] = (model, fwd)
    return _RUNNERS[kind]


def _vidax(kind, tensors, latents, fps, cond, step, *, lengths=None, noisy=None):
    model, fwd = _runner(kind, tensors)
    x, ids, lens, noisy_default = _batch(latents, cond, lengths)
    noisy = noisy_default if noisy is None else noisy
    out = fwd(model, jnp.asarray(x), jnp.full((2,), step, jnp.float32), jnp.asarray(ids), jnp.asarray(lens),
              jnp.asarray(noisy), fps=fps)
    return np.asarray(out, np.float64)


@pytest.fixture(scope="module")
def results(case):
    kind, model, tensors, latents, fps, cond, step = case
    want64 = np.stack([_call_reference(model, latents, p, fps, cond, step, torch.float64) for p in PROMPTS])
    want32 = np.stack([_call_reference(model, latents, p, fps, cond, step, torch.float32) for p in PROMPTS])
    got = _vidax(kind, tensors, latents, fps, cond, step)
    return got, want32, want64


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_parity_with_diffusers(case, results):
    kind, *_ = case
    got, want32, want64 = results
    assert got.shape == want64.shape
    tol = fp32_tolerance(want32, want64)
    err = _rel(got, want64)
    print(f"cosmos3 {kind}: rel max err {err:.3e} (tolerance {tol:.3e}; reference fp32 vs fp64 "
          f"{_rel(want32, want64):.3e}; |ref| max {np.abs(want64).max():.3f})")
    assert err <= tol
    cond = CASES[kind][3]
    assert np.all(got[:, :, cond] == 0.0)  # conditioning frames: zero velocity, as the reference returns


def test_branches_differ_and_offsets_matter(case, results):
    """The two branches' outputs differ by far more than the tolerance (so the parity above checks each branch's
    own offset), and giving the short branch the long branch's length (its video positions shifted by 3) moves
    its output past the tolerance."""
    kind, model, tensors, latents, fps, cond, step = case
    got, want32, want64 = results
    tol = fp32_tolerance(want32, want64)
    assert _rel(got[1], got[0]) > 100 * tol
    shifted = _vidax(kind, tensors, latents, fps, cond, step, lengths=[7, 7])
    assert _rel(shifted[1], want64[1]) > 10 * tol
    assert _rel(shifted[0], want64[0]) <= tol  # the long branch is unchanged


def test_dropped_terms_fail(case, results):
    """fps modulation off, or the timestep embedding added to the conditioning frame too, move the output past the
    tolerance (the nano case has no conditioning frame; its fps 16 modulates the temporal positions)."""
    kind, model, tensors, latents, fps, cond, step = case
    got, want32, want64 = results
    tol = fp32_tolerance(want32, want64)
    if cond:
        moved = _vidax(kind, tensors, latents, fps, cond, step, noisy=np.ones((2, latents.shape[2]), np.float32))
        noisy = [f for f in range(latents.shape[2]) if f not in cond]
        assert _rel(moved[:, :, noisy], want64[:, :, noisy]) > 10 * tol
    else:
        moved = _vidax(kind, tensors, latents, 24.0, cond, step)
        assert _rel(moved, want64) > 10 * tol


def test_positions_are_the_pipelines():
    """The video positions vidax builds equal the pipeline's get_3d_mrope_ids_vae_tokens (fps on and off, spatial
    reset on and off) at the offsets of both branches."""
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import get_3d_mrope_ids_vae_tokens

    from vidax_cosmos.cosmos3_rope import video_positions

    for fps, reset in ((16.0, True), (None, True), (30.0, False)):
        offset = jnp.asarray([7 + 15000, 4 + 15000])
        got = np.asarray(video_positions((3, 2, 3), offset, fps=fps, base_fps=24.0, tcf=4, modulate=True,
                                         reset_spatial=reset))
        for b, n in enumerate((7, 4)):
            want, _ = get_3d_mrope_ids_vae_tokens(3, 2, 3, n + 15000, reset_spatial_indices=reset, fps=fps,
                                                  base_fps=24.0, temporal_compression_factor=4)
            np.testing.assert_array_equal(got[:, b], want.float().numpy())


def test_conversion_reports_every_problem(case):
    kind, _, tensors, *_ = case
    broken = dict(tensors)
    broken.pop("proj_in.weight")
    broken["layers.0.self_attn.to_k.weight"] = np.zeros((3, 3), np.float32)
    broken["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as e:
        load_cosmos3_dit(Cosmos3DiTConfig.from_config(CASES[kind][0]), broken)
    msg = str(e.value)
    assert "proj_in" in msg and "to_k" in msg and "extra.weight" in msg


def test_staged_forward_by_single_blocks_is_the_whole(case, results):
    """``pre`` -> ``run_block_group`` on one-layer slices (what the offload executor does) -> ``post`` gives the
    resident forward."""
    from flax import nnx

    kind, model_t, tensors, latents, fps, cond, step = case
    got, *_ = results
    model, _ = _runner(kind, tensors)
    x, ids, lens, noisy = _batch(latents, cond)
    h, aux = model.pre(jnp.asarray(x), jnp.full((2,), step), jnp.asarray(ids), text_lengths=jnp.asarray(lens),
                       noisy_frames=jnp.asarray(noisy), fps=fps)
    graphdef, state = nnx.split(model.blocks)
    for i in range(CASES[kind][0]["num_hidden_layers"]):
        h = type(model).run_block_group("blocks", graphdef, jax.tree.map(lambda a: a[i:i + 1], state), h, aux)
    staged = np.asarray(model.post(h, aux, x.shape), np.float64)
    np.testing.assert_allclose(staged, got, rtol=1e-5, atol=1e-6 * np.abs(got).max())


def test_bf16_policy_keeps_norms_and_time_embedder_fp32(case, results):
    """bf16 weights: matmul weights and the embedding bf16; norm gains and the time embedder (the reference's
    _keep_in_fp32_modules) float32; the output stays within bf16 rounding of the fp32 result."""
    from vidax_core.nn.state import flat_state

    kind, model_t, tensors, latents, fps, cond, step = case
    got, *_ = results
    cfg = Cosmos3DiTConfig.from_config(CASES[kind][0], dtype=jnp.bfloat16)
    model = load_cosmos3_dit(cfg, tensors)
    flat = flat_state(model)
    assert flat[("embed_tokens",)].dtype == jnp.bfloat16
    assert flat[("blocks", "self_attn", "add_q_proj", "kernel")].dtype == jnp.bfloat16
    assert flat[("blocks", "self_attn", "norm_added_q", "scale")].dtype == jnp.float32
    assert flat[("time_embedder", "linear_1", "kernel")].dtype == jnp.float32
    x, ids, lens, noisy = _batch(latents, cond)
    half = np.asarray(jax.jit(lambda m, *a: m(*a[:3], text_lengths=a[3], noisy_frames=a[4], fps=fps))(
        model, jnp.asarray(x), jnp.full((2,), step), jnp.asarray(ids), jnp.asarray(lens), jnp.asarray(noisy)),
        np.float64)
    rel = float(np.linalg.norm(half - got) / np.linalg.norm(got))
    print(f"cosmos3 {kind} bf16 vs fp32: rel {rel:.2e}")
    assert np.isfinite(half).all() and rel < 5e-2
