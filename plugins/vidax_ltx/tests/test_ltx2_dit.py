"""LTX-2.x joint audio-video DiT parity against diffusers' LTX2VideoTransformer3DModel (torch is a test-only oracle)
on tiny random configs of both generations, loaded from the reference's ``save_pretrained`` files; the structure of
the published 19B / 22B models without weights. Tolerances come from the reference's own fp32 error (its fp32 run
against its float64 run on the same inputs)."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from vidax_core.io.convert import ConversionError, convert  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_ltx.convert_ltx2 import LTX2_DIT_RULES, load_ltx2_dit  # noqa: E402
from vidax_ltx.ltx2_dit import LTX2DiT, LTX2DiTConfig, audio_positions, video_positions  # noqa: E402
from vidax_core.testing.reference import randomize_, reference_in  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_dit")

# heads x head_dim = 32 (32 // 6 = 5 frequencies per axis: one identity pair in front); audio 2 x 8 = 16.
TINY_20 = dict(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16, cross_attention_dim=32,
               audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2, audio_attention_head_dim=8,
               audio_cross_attention_dim=16, num_layers=2, caption_channels=24, rope_type="split",
               use_prompt_embeddings=True)
TINY_20_INTERLEAVED = dict(TINY_20, rope_type="interleaved")
TINY_25 = dict(TINY_20, gated_attn=True, cross_attn_mod=True, audio_gated_attn=True, audio_cross_attn_mod=True,
               use_prompt_embeddings=False, perturbed_attn=True, ff_bias=False, use_keyframes_abs_pos_embedding=True)
CONFIGS = {"ltx2.0": TINY_20, "ltx2.0-interleaved": TINY_20_INTERLEAVED, "ltx2.5": TINY_25}
CROSS_TIMESTEP = {"ltx2.0": False, "ltx2.0-interleaved": False, "ltx2.5": True}

GRID = (3, 2, 3)  # latent frames, height, width
AUDIO_FRAMES = 7
FPS = 24.0
B, L = 2, 5


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def case(request, tmp_path_factory):
    """(name, reference model, vidax model loaded from the reference's save_pretrained files, inputs)."""
    from diffusers import LTX2VideoTransformer3DModel
    from safetensors.numpy import load_file

    name = request.param
    ref = LTX2VideoTransformer3DModel(**CONFIGS[name]).eval()
    randomize_(ref, seed=1)
    path = tmp_path_factory.mktemp(name)
    ref.save_pretrained(path, safe_serialization=True)
    config = json.loads((path / "config.json").read_text())
    tensors = {}
    for f in sorted(path.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    model = load_ltx2_dit(LTX2DiTConfig.from_config(config), tensors)

    cfg = CONFIGS[name]
    rng = np.random.default_rng(0)
    s = int(np.prod(GRID))
    ctx_w = cfg["caption_channels"] if cfg["use_prompt_embeddings"] else cfg["cross_attention_dim"]
    actx_w = cfg["caption_channels"] if cfg["use_prompt_embeddings"] else cfg["audio_cross_attention_dim"]
    mask = np.ones((B, L), bool)
    mask[1, 3:] = False
    keyframes = np.zeros((B, s, 1), np.float32)
    keyframes[:, : GRID[1] * GRID[2]] = 1.0  # the first latent frame
    inputs = dict(
        video=rng.standard_normal((B, s, cfg["in_channels"])).astype(np.float32),
        audio=rng.standard_normal((B, AUDIO_FRAMES, cfg["audio_in_channels"])).astype(np.float32),
        ctx=rng.standard_normal((B, L, ctx_w)).astype(np.float32),
        actx=rng.standard_normal((B, L, actx_w)).astype(np.float32),
        mask=mask, t=np.array([937.5, 312.25], np.float32), ta=np.array([700.0, 120.5], np.float32),
        keyframes=keyframes,
    )
    return name, ref, model, inputs


def _reference(ref, inp, dtype, cross_timestep, isolate=False, stg_blocks=None):
    """The reference in ``dtype``; in float64 its timestep sinusoids are float64 too, so the float64 run is a true
    oracle: a timestep of ~1000 turns one float32 ulp of a frequency into ~1e-5 rad of phase, an error every float32
    implementation has and the tolerance must see."""
    cast = lambda a: torch.from_numpy(np.asarray(a)).to(dtype)  # noqa: E731
    kw = {} if stg_blocks is None else {"spatio_temporal_guidance_blocks": list(stg_blocks)}
    if ref.config.use_keyframes_abs_pos_embedding:
        kw["video_keyframes_mask"] = cast(inp["keyframes"])
    with reference_in(ref, dtype) as m:
        return _call_reference(m, ref, inp, cast, cross_timestep, isolate, kw)


def _call_reference(m, ref, inp, cast, cross_timestep, isolate, kw):
    with torch.no_grad():
        v, a = m(hidden_states=cast(inp["video"]), audio_hidden_states=cast(inp["audio"]),
                 encoder_hidden_states=cast(inp["ctx"]), audio_encoder_hidden_states=cast(inp["actx"]),
                 timestep=cast(inp["t"]), audio_timestep=cast(inp["ta"]), sigma=cast(inp["t"]),
                 audio_sigma=cast(inp["ta"]), encoder_attention_mask=torch.from_numpy(inp["mask"].astype(np.int64)),
                 audio_encoder_attention_mask=torch.from_numpy(inp["mask"].astype(np.int64)),
                 num_frames=GRID[0], height=GRID[1], width=GRID[2], fps=FPS, audio_num_frames=AUDIO_FRAMES,
                 use_cross_timestep=cross_timestep, isolate_modalities=isolate, return_dict=False, **kw)
    return v.double().numpy(), a.double().numpy()


@functools.cache
def _forward(cross_timestep: bool):
    """One jitted forward per cross-timestep convention (a model of another config retraces it)."""
    return jax.jit(lambda m, lat, t, ta, ctx, vp, ap, km, cm: m(
        lat, t, ctx, video_positions=vp, audio_positions=ap, audio_timestep=ta, sigma=t, audio_sigma=ta,
        use_cross_timestep=cross_timestep, cross_modal=cm, video_keyframes_mask=km))


@functools.cache
def _perturbed_forward(cross_timestep: bool):
    """The STG pass: ``perturbed=True`` with per-sample, per-layer skip flags."""
    return jax.jit(lambda m, lat, t, ta, ctx, vp, ap, km, skip: m(
        lat, t, ctx, video_positions=vp, audio_positions=ap, audio_timestep=ta, sigma=t, audio_sigma=ta,
        use_cross_timestep=cross_timestep, video_keyframes_mask=km, stg_skip=skip, perturbed=True))


def _vidax(model, inp, cross_timestep, cross_modal=None, stg_blocks=None):
    cfg = model.cfg
    vp = np.broadcast_to(video_positions(cfg, GRID, FPS), (B, int(np.prod(GRID)), 3))
    ap = np.broadcast_to(audio_positions(cfg, AUDIO_FRAMES), (B, AUDIO_FRAMES, 1))
    j = jnp.asarray
    args = (model, {"video": j(inp["video"]), "audio": j(inp["audio"])}, j(inp["t"]), j(inp["ta"]),
            {"video": j(inp["ctx"]), "audio": j(inp["actx"]), "mask": j(inp["mask"])}, j(vp), j(ap),
            j(inp["keyframes"]))
    if stg_blocks is not None:
        skip = np.zeros((B, cfg.num_layers), np.float32)
        skip[:, list(stg_blocks)] = 1.0
        out = _perturbed_forward(cross_timestep)(*args, j(skip))
    else:
        out = _forward(cross_timestep)(*args, None if cross_modal is None else j(cross_modal))
    return np.asarray(out["video"], np.float64), np.asarray(out["audio"], np.float64)


def _tolerance(want32, want64) -> float:
    return max(8 * float(np.max(np.abs(want32 - want64))), 1e-6)


def _check(name, got, want32, want64):
    tol = _tolerance(want32, want64)
    err = float(np.max(np.abs(got - want64)))
    rel = float(np.linalg.norm(got - want64) / np.linalg.norm(want64))
    print(f"{name}: max_abs={err:.3e} rel={rel:.3e} tol={tol:.3e} |ref|max={np.abs(want64).max():.3f}")
    assert err <= tol, (err, tol)


def test_parity_with_diffusers(case):
    """Both streams of the joint DiT against the reference (text mask, per-sample timesteps that differ between
    the streams, the generation's cross-timestep convention)."""
    name, ref, model, inp = case
    ct = CROSS_TIMESTEP[name]
    v64, a64 = _reference(ref, inp, torch.float64, ct)
    v32, a32 = _reference(ref, inp, torch.float32, ct)
    v, a = _vidax(model, inp, ct)
    assert v.shape == v64.shape and a.shape == a64.shape
    _check(f"{name} video", v, v32, v64)
    _check(f"{name} audio", a, a32, a64)


def test_isolated_modalities_match_reference(case):
    """``cross_modal=0`` is the reference's ``isolate_modalities=True`` (modality guidance's pass)."""
    name, ref, model, inp = case
    ct = CROSS_TIMESTEP[name]
    v64, a64 = _reference(ref, inp, torch.float64, ct, isolate=True)
    v32, a32 = _reference(ref, inp, torch.float32, ct, isolate=True)
    v, a = _vidax(model, inp, ct, cross_modal=np.zeros(B, np.float32))
    _check(f"{name} isolated video", v, v32, v64)
    _check(f"{name} isolated audio", a, a32, a64)


def test_stg_pass_matches_reference(case):
    """The perturbed pass of spatio-temporal guidance (``spatio_temporal_guidance_blocks``): in a model built with
    ``perturbed_attn`` both self-attentions of the named blocks give their values; without it the pass is the plain
    one, as in the reference. Perturbing another block lands far outside the bound."""
    name, ref, model, inp = case
    ct = CROSS_TIMESTEP[name]
    v64, a64 = _reference(ref, inp, torch.float64, ct, stg_blocks=[1])
    v32, a32 = _reference(ref, inp, torch.float32, ct, stg_blocks=[1])
    v, a = _vidax(model, inp, ct, stg_blocks=[1])
    _check(f"{name} STG video", v, v32, v64)
    _check(f"{name} STG audio", a, a32, a64)
    if model.cfg.perturbed_attn:
        v, a = _vidax(model, inp, ct, stg_blocks=[0])
        assert np.abs(v - v64).max() > 100 * _tolerance(v32, v64)
        assert np.abs(a - a64).max() > 100 * _tolerance(a32, a64)


def test_parity_check_can_fail(case):
    """The tolerance is tight enough to see a missing term: dropping the cross-modal attentions, flipping the
    cross-timestep convention or shifting the frame rate moves each stream far past it."""
    name, ref, model, inp = case
    ct = CROSS_TIMESTEP[name]
    v64, a64 = _reference(ref, inp, torch.float64, ct)
    v32, a32 = _reference(ref, inp, torch.float32, ct)
    tv, ta = _tolerance(v32, v64), _tolerance(a32, a64)
    v, a = _vidax(model, inp, ct, cross_modal=np.ones(B, np.float32))
    assert np.abs(v - v64).max() <= tv and np.abs(a - a64).max() <= ta  # all-ones is the plain pass
    v, a = _vidax(model, inp, ct, cross_modal=np.zeros(B, np.float32))
    assert np.abs(v - v64).max() > 100 * tv and np.abs(a - a64).max() > 100 * ta
    v, a = _vidax(model, inp, not ct)
    assert np.abs(v - v64).max() > 100 * tv and np.abs(a - a64).max() > 100 * ta
    moved = dict(inp, t=inp["t"] + 10.0)
    v, a = _vidax(model, moved, ct)
    assert np.abs(v - v64).max() > 100 * tv and np.abs(a - a64).max() > 100 * ta


def test_positions_follow_the_reference():
    """Patch midpoints in seconds (video at the frame rate, audio at the mel hop) equal the reference's."""
    from diffusers import LTX2VideoTransformer3DModel

    ref = LTX2VideoTransformer3DModel(**TINY_20)
    cfg = LTX2DiTConfig.from_config(TINY_20)
    for fps in (24.0, 25.0, 30.0):
        c = ref.rope.prepare_video_coords(1, *GRID, torch.device("cpu"), fps=fps)
        np.testing.assert_array_equal(video_positions(cfg, GRID, fps), ((c[..., 0] + c[..., 1]) / 2)[0].T.numpy())
    c = ref.audio_rope.prepare_audio_coords(1, AUDIO_FRAMES, torch.device("cpu"))
    np.testing.assert_array_equal(audio_positions(cfg, AUDIO_FRAMES), ((c[..., 0] + c[..., 1]) / 2)[0].T.numpy())
    assert not np.array_equal(video_positions(cfg, GRID, 24.0), video_positions(cfg, GRID, 25.0))


@pytest.mark.parametrize("perturbed", [False, True])
def test_blockwise_carry_matches_the_scan(case, perturbed):
    """Running the stack one block at a time with the (video, audio) carry, as offload does, is the scan; the STG
    pass carries the layer index so each slice finds its own skip flags."""
    name, _, model, inp = case
    cfg = model.cfg
    j = jnp.asarray
    vp = j(np.broadcast_to(video_positions(cfg, GRID, FPS), (B, int(np.prod(GRID)), 3)))
    ap = j(np.broadcast_to(audio_positions(cfg, AUDIO_FRAMES), (B, AUDIO_FRAMES, 1)))
    lat = {"video": j(inp["video"]), "audio": j(inp["audio"])}
    ctx = {"video": j(inp["ctx"]), "audio": j(inp["actx"]), "mask": j(inp["mask"])}
    skip = j(np.eye(B, cfg.num_layers, dtype=np.float32)) if perturbed else None
    carry, aux = model.pre(lat, j(inp["t"]), ctx, video_positions=vp, audio_positions=ap, stg_skip=skip,
                           perturbed=perturbed)
    assert len(carry) == (3 if perturbed else 2)
    graphdef, state = nnx.split(model.blocks)
    whole = model.post(model.run_block_group("blocks", graphdef, state, carry, aux), aux)
    for i in range(cfg.num_layers):
        carry = model.run_block_group("blocks", graphdef, jax.tree.map(lambda a: a[i:i + 1], state), carry, aux)
    chunked = model.post(carry, aux)
    for k in ("video", "audio"):
        np.testing.assert_allclose(np.asarray(chunked[k]), np.asarray(whole[k]), atol=1e-6)
    if perturbed and cfg.perturbed_attn:  # the flags reached the blocks
        plain, plain_aux = model.pre(lat, j(inp["t"]), ctx, video_positions=vp, audio_positions=ap)
        base = model.post(model.run_block_group("blocks", graphdef, state, plain, plain_aux), plain_aux)
        assert np.abs(np.asarray(base["video"]) - np.asarray(whole["video"])).max() > 1e-3


def test_conversion_reports_every_problem(case):
    from diffusers import LTX2VideoTransformer3DModel

    name = case[0]
    tensors = {k: v.numpy() for k, v in LTX2VideoTransformer3DModel(**CONFIGS[name]).state_dict().items()}
    tensors.pop("audio_proj_in.weight")
    tensors["transformer_blocks.1.video_to_audio_attn.to_k.weight"] = np.zeros((3, 3), np.float32)
    tensors["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ConversionError) as e:
        load_ltx2_dit(LTX2DiTConfig.from_config(CONFIGS[name]), tensors)
    msg = str(e.value)
    assert "audio_proj_in" in msg and "video_to_audio_attn.to_k" in msg and "extra.weight" in msg


# The published transformer configs: diffusers' scripts/convert_ltx2_to_diffusers.py, get_ltx2_transformer_config
# for "2.0" (Lightricks/LTX-2, the 19B model) and "2.5" (Lightricks/LTX-2.5, the 22B model); keys not listed take
# the class defaults, which those dicts also spell out (vae_scale_factors (8, 32, 32), base sizes 2048, theta 1e4).
_COMMON = dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
               attention_head_dim=128, cross_attention_dim=4096, vae_scale_factors=(8, 32, 32), pos_embed_max_pos=20,
               base_height=2048, base_width=2048, audio_in_channels=128, audio_out_channels=128, audio_patch_size=1,
               audio_patch_size_t=1, audio_num_attention_heads=32, audio_attention_head_dim=64,
               audio_cross_attention_dim=2048, audio_scale_factor=4, audio_pos_embed_max_pos=20,
               audio_sampling_rate=16000, audio_hop_length=160, num_layers=48, activation_fn="gelu-approximate",
               qk_norm="rms_norm_across_heads", norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=3840,
               attention_bias=True, attention_out_bias=True, rope_theta=10000.0, rope_double_precision=True,
               causal_offset=1, timestep_scale_multiplier=1000, cross_attn_timestep_scale_multiplier=1000,
               rope_type="split")
LTX_2_19B = dict(_COMMON, gated_attn=False, cross_attn_mod=False, audio_gated_attn=False,
                 audio_cross_attn_mod=False, use_prompt_embeddings=True, perturbed_attn=False)
LTX_2_5_22B = dict(_COMMON, gated_attn=True, cross_attn_mod=True, audio_gated_attn=True, audio_cross_attn_mod=True,
                   use_prompt_embeddings=False, perturbed_attn=True, ff_bias=False,
                   use_keyframes_abs_pos_embedding=True)


def test_every_registered_ltx2_model_is_covered():
    """Each LTX-2.x id's DiT is one of the full-size configs checked below."""
    from vidax_core.testing.reference import registered_models
    from vidax_ltx.ltx2_presets import LTX2_IDS

    assert LTX2_IDS <= registered_models("ltx")
    assert {i.rsplit("-", 1)[0] for i in LTX2_IDS} == {"ltx-2-19b", "ltx-2.5-22b"}


@pytest.mark.parametrize("name,config", [("ltx-2-19b", LTX_2_19B), ("ltx-2.5-22b", LTX_2_5_22B)])
def test_full_size_dit(name, config):
    """Every key and shape of the reference built on the meta device is what the table expects from the
    eval_shape tree of the full-size vidax model, and nothing is left over."""
    from diffusers import LTX2VideoTransformer3DModel

    with torch.device("meta"):
        ref = LTX2VideoTransformer3DModel(**config)
    zero = np.zeros((), np.float32)
    tensors = {k: np.broadcast_to(zero, tuple(v.shape)) for k, v in ref.state_dict().items()}
    _, _, flat = abstract_model(lambda: LTX2DiT(LTX2DiTConfig.from_config(config), rngs=nnx.Rngs(0)))
    convert(tensors, LTX2_DIT_RULES, flat, component="transformer", check_only=True)
    n_ref = sum(int(np.prod(v.shape)) for v in tensors.values())
    n_vidax = sum(int(np.prod(v.shape)) for v in flat.values())
    print(f"{name}: {n_vidax / 1e9:.3f}B DiT parameters")
    assert n_ref == n_vidax


def test_original_single_file_keys_load_the_same_params():
    """LTX-2.0's original single-file names: diffusers' own single-file converter maps the test's original-named
    state dict back to the diffusers names (so the names are the release's), :func:`original_dit_key` maps every
    one the same way, leaves the connectors and other parts out, and the loaded parameters equal the diffusers
    twin's exactly."""
    from diffusers import LTX2VideoTransformer3DModel
    from diffusers.loaders.single_file_utils import convert_ltx2_transformer_to_diffusers

    from vidax_core.testing.tiny import ltx2_original_keys
    from vidax_ltx.convert_ltx2 import original_dit_key, original_dit_tensors

    ref = LTX2VideoTransformer3DModel(**TINY_20).eval()
    randomize_(ref, seed=2)
    tensors = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    original = {ltx2_original_keys.dit_key(k): v for k, v in tensors.items()}
    assert sorted(convert_ltx2_transformer_to_diffusers(dict(original))) == sorted(tensors)
    assert {original_dit_key(k) for k in original} == set(tensors)
    for other in ("model.diffusion_model.video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q.weight",
                  "vae.decoder.conv_in.conv.weight", "text_embedding_projection.aggregate_embed.weight"):
        assert original_dit_key(other) is None
    cfg = LTX2DiTConfig.from_config(TINY_20)
    a = nnx.state(load_ltx2_dit(cfg, tensors))
    b = nnx.state(load_ltx2_dit(cfg, original_dit_tensors(original)))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
