"""LTX-2.x prompt encoding against diffusers' LTX2Pipeline (``encode_prompt``, then ``connectors`` as ``__call__``
runs them) on tiny random encoders of both generations, loaded from the reference's ``save_pretrained`` folders:
LTX-2.0 (Gemma-3, masked mean/range features, shared projection) and LTX-2.5 (Gemma-4 unified, per-token RMS
features, per-stream projections, gated connectors): the tokens, the stacked hidden states, the connector outputs and
the end result for two prompts of different lengths. Bounds come from the reference's own fp32-vs-float64 error
and vidax's own fp32 error; plausible bugs (wrong padding side, the last hidden state before the final norm,
layer-major packing, registers not applied or not front-aligned) land past them."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from flax import nnx  # noqa: E402

from vidax_core.encoders import decoder_llm as dl  # noqa: E402
from vidax_core.io.checkpoint import Checkpoint  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_bound, fp32_error, max_abs  # noqa: E402
from vidax_core.testing.reference import state_arrays  # noqa: E402
from vidax_core.testing.tiny.ltx2_text import MAX_LENGTH, build_tiny_ltx2_text  # noqa: E402
from vidax_ltx import ltx2_connectors as lc  # noqa: E402
from vidax_ltx import ltx2_text  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_text")

PROMPTS = ["  A red car drives through the city streets at night. ", "A cat sits."]
FAIL_FACTOR = 10.0  # a bug must move the result this many times past the parity bound


@pytest.fixture(scope="module", params=["ltx2.0", "ltx2.5"])
def case(request, tmp_path_factory):
    """(generation, reference pipeline, vidax encoder loaded from the reference's folders, reference outputs)."""
    pipe, folder = build_tiny_ltx2_text(tmp_path_factory.mktemp(request.param), request.param)
    encoder = ltx2_text.load(Checkpoint(str(folder)), dtype=jnp.float32)
    ref = {dt: _reference(pipe, dt) for dt in ("fp32", "fp64")}
    ref["mask"] = ref["fp32"]["mask"]
    return request.param, pipe, encoder, ref


def _reference(pipe, which: str) -> dict:
    """The pipeline's prompt path in ``which`` precision: stacked hidden states (B, S, D, L), mask, both streams."""
    dtype = torch.float64 if which == "fp64" else torch.float32
    gemma, conn = pipe.text_encoder.to(dtype), pipe.connectors.to(dtype)
    try:
        with torch.no_grad():
            embeds, mask, _, _ = pipe.encode_prompt(PROMPTS, do_classifier_free_guidance=False,
                                                    max_sequence_length=MAX_LENGTH, dtype=dtype)
            video, audio, conn_mask = conn(embeds, mask, padding_side=pipe.tokenizer.padding_side)
    finally:
        gemma.to(torch.float32), conn.to(torch.float32)
    d = pipe.connectors.config.caption_channels
    return {"stacked": embeds.double().numpy().reshape(*embeds.shape[:2], d, -1), "mask": mask.numpy(),
            "video": video.double().numpy(), "audio": audio.double().numpy(), "conn_mask": conn_mask.numpy()}


def _valid(h, mask):
    """Valid tokens only: a padding token's hidden state is a convention the features never read."""
    return h[mask.astype(bool)]


@functools.cache
def _weights(pipe):
    return state_arrays(pipe.text_encoder), state_arrays(pipe.connectors)


def _streams(connectors, hidden, mask, side="left"):
    out = ltx2_text.connect(connectors, np.asarray(hidden, np.float32), mask, side)
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def _connectors_err(encoder, pipe, hidden, mask, base):
    """vidax's own fp32 error of the connectors on ``hidden`` (weights and inputs moved one ulp)."""
    cfg = encoder.connectors.cfg

    def run(weights, h):
        out = _streams(lc.load_connectors(cfg, weights), h, mask)
        return np.concatenate([out["video"].ravel(), out["audio"].ravel()])

    return fp32_error(run, _weights(pipe)[1], np.asarray(hidden, np.float32), base=base)


def test_tokens_are_the_pipelines(case):
    """Stripped, left-padded to the pipeline's length although the tokenizer folder says right, BOS first."""
    _, pipe, encoder, ref = case
    assert encoder.tokenizer.padding_side == "right"
    ids, mask = ltx2_text.tokenize(encoder.tokenizer, PROMPTS, MAX_LENGTH)
    np.testing.assert_array_equal(mask, ref["mask"])
    want = pipe.tokenizer([p.strip() for p in PROMPTS], padding="max_length", max_length=MAX_LENGTH,
                          truncation=True, add_special_tokens=True, return_tensors="np")
    np.testing.assert_array_equal(ids, want["input_ids"])
    lengths = mask.sum(-1)
    assert lengths[0] > lengths[1] > 0 and mask[1, 0] == 0 and mask[1, -1] == 1  # different lengths, left padding
    assert (ids[np.arange(2), MAX_LENGTH - lengths] == pipe.tokenizer.bos_token_id).all()


def test_stacked_hidden_states_match(case):
    """Every Gemma hidden state (embeddings, each layer, the last after the final norm) stacked on the last axis."""
    name, pipe, encoder, ref = case
    ids, mask = ltx2_text.tokenize(encoder.tokenizer, PROMPTS, MAX_LENGTH)
    got = np.asarray(ltx2_text.gemma_hidden_states(encoder.gemma, ids, mask), np.float64)
    assert got.shape == ref["fp64"]["stacked"].shape == (2, MAX_LENGTH, 16, 4)
    cfg = encoder.gemma.cfg

    def run(weights):
        return _valid(np.asarray(ltx2_text.gemma_hidden_states(dl.load_decoder_llm(cfg, weights), ids, mask)), mask)

    err = fp32_error(run, _weights(pipe)[0], base=_valid(got, mask))
    assert_fp32_parity(f"{name} stacked hidden states", _valid(got, mask), _valid(ref["fp32"]["stacked"], mask),
                       _valid(ref["fp64"]["stacked"], mask), vidax_err=err)


def test_connector_outputs_match(case):
    """The connectors alone, on the reference's own float64 hidden states: both streams."""
    name, pipe, encoder, ref = case
    hidden, mask = ref["fp64"]["stacked"], ref["mask"]
    with torch.no_grad():
        want = {}
        for dt in (torch.float32, torch.float64):
            conn = pipe.connectors.to(dt)
            v, a, _ = conn(torch.from_numpy(hidden.astype(np.float32)).to(dt), torch.from_numpy(mask),
                           padding_side="left")
            want[dt] = {"video": v.double().numpy(), "audio": a.double().numpy()}
        pipe.connectors.to(torch.float32)
    got = _streams(encoder.connectors, hidden, mask)
    err = _connectors_err(encoder, pipe, hidden, mask, np.concatenate([got["video"].ravel(), got["audio"].ravel()]))
    for k in ("video", "audio"):
        assert_fp32_parity(f"{name} connector {k}", got[k], want[torch.float32][k], want[torch.float64][k],
                           vidax_err=err)


def test_encode_prompt_matches_the_pipeline(case):
    """Prompts -> the DiT's video and audio text streams, end to end; the reference's DiT mask is all ones."""
    name, pipe, encoder, ref = case
    got = ltx2_text.encode_prompt(encoder, PROMPTS, max_sequence_length=MAX_LENGTH)
    cfg = encoder.connectors.cfg
    assert got["video"].shape == (2, MAX_LENGTH, cfg.stream_width("video"))
    assert got["audio"].shape == (2, MAX_LENGTH, cfg.stream_width("audio"))
    assert (ref["fp32"]["conn_mask"] == 1).all()
    base = np.concatenate([got["video"].ravel(), got["audio"].ravel()])

    def run(gemma_weights, conn_weights):
        moved = ltx2_text.LTX2TextEncoder(encoder.tokenizer, dl.load_decoder_llm(encoder.gemma.cfg, gemma_weights),
                                          lc.load_connectors(cfg, conn_weights))
        out = ltx2_text.encode_prompt(moved, PROMPTS, max_sequence_length=MAX_LENGTH)
        return np.concatenate([out["video"].ravel(), out["audio"].ravel()])

    err = fp32_error(run, *_weights(pipe), base=base)
    for k in ("video", "audio"):
        assert_fp32_parity(f"{name} encode_prompt {k}", got[k], ref["fp32"][k], ref["fp64"][k], vidax_err=err)


def _bound(name, ref, k, encoder, pipe):
    hidden, mask = ref["fp64"]["stacked"], ref["mask"]
    got = _streams(encoder.connectors, hidden, mask)
    err = _connectors_err(encoder, pipe, hidden, mask, np.concatenate([got["video"].ravel(), got["audio"].ravel()]))
    return fp32_bound(ref["fp32"][k], ref["fp64"][k], err)


def _moved(label, got, want, bound):
    err = max_abs(got, want)
    print(f"{label}: max abs {err:.3e} vs bound {bound:.3e}")
    return err > FAIL_FACTOR * bound


def _pre_norm_last_state(pipe, mask):
    """The reference's last decoder layer output before Gemma's final norm (a hook on the layer)."""
    seen = {}
    layer = pipe.text_encoder.model.language_model.layers[-1]
    handle = layer.register_forward_hook(lambda m, i, o: seen.setdefault("h", o[0] if isinstance(o, tuple) else o))
    try:
        with torch.no_grad():
            pipe.encode_prompt(PROMPTS, do_classifier_free_guidance=False, max_sequence_length=MAX_LENGTH)
    finally:
        handle.remove()
    return seen["h"].double().numpy()


def test_plausible_bugs_move_past_the_bound(case, monkeypatch):
    name, pipe, encoder, ref = case
    hidden, mask = ref["fp64"]["stacked"], ref["mask"]
    want = ref["fp64"]
    bounds = {k: _bound(name, ref, k, encoder, pipe) for k in ("video", "audio")}
    conn = encoder.connectors

    def check(label, got, expect_moved=True):
        moved = [_moved(f"{name} {label} {k}", got[k], want[k], bounds[k]) for k in ("video", "audio")]
        assert all(moved) if expect_moved else not any(moved), (label, moved)

    # the padding side: LTX-2.0's statistics depend on it; 2.3 / 2.5's features do not (the reference ignores it)
    check("right padding side", _streams(conn, hidden, mask, "right"), expect_moved=name == "ltx2.0")
    # the last hidden state taken before the final norm
    wrong = hidden.copy()
    wrong[..., -1] = _pre_norm_last_state(pipe, mask)
    check("pre-norm last state", _streams(conn, wrong, mask))
    # layer-major packing of the (D, L) features
    b, s, d, n = hidden.shape
    check("layer-major packing", _streams(conn, hidden.transpose(0, 1, 3, 2).reshape(b, s, d, n), mask))
    # padding masked in attention instead of replaced by registers
    no_registers = nnx.clone(conn)
    no_registers.video_connector.learnable_registers = None
    no_registers.audio_connector.learnable_registers = None
    check("mask instead of registers", _streams(no_registers, hidden, mask))
    # registers written over the padding in place, valid tokens not moved to the front
    monkeypatch.setattr(lc, "replace_padding", lambda x, m, r: jnp.where(
        jnp.asarray(m).astype(bool)[..., None], x, jnp.tile(r, (x.shape[1] // r.shape[0], 1))[None]))
    eager = conn(jnp.asarray(hidden, jnp.float32), jnp.asarray(mask), "left")
    check("registers in place", {k: np.asarray(v, np.float64) for k, v in eager.items()})


def test_original_single_file_keys_load_the_same_params(case):
    """The connector part of the original single-file layout (``text_embedding_projection.*`` and the DiT's
    ``*_embeddings_connector.*``) loads to exactly the params of its diffusers twin; a missing tensor is named."""
    name, pipe, encoder, _ = case
    from vidax_core.testing.tiny.ltx2_original_keys import connector_key

    sd = _weights(pipe)[1]
    single_file = {connector_key(k): v for k, v in sd.items()}
    single_file["model.diffusion_model.proj_in.weight"] = np.zeros((4, 4), np.float32)  # the DiT's own keys
    assert any(k.startswith("text_embedding_projection.") for k in single_file)
    loaded = lc.load_connectors(encoder.connectors.cfg, lc.original_connector_tensors(single_file))
    a, b = nnx.state(loaded, nnx.Param), nnx.state(encoder.connectors, nnx.Param)
    for (pa, va), (pb, vb) in zip(sorted(nnx.to_flat_state(a)), sorted(nnx.to_flat_state(b))):
        assert pa == pb
        np.testing.assert_array_equal(np.asarray(va[...]), np.asarray(vb[...]))
    del single_file["model.diffusion_model.video_embeddings_connector.learnable_registers"]
    with pytest.raises(ConversionError, match="learnable_registers"):
        lc.load_connectors(encoder.connectors.cfg, lc.original_connector_tensors(single_file))


# Gemma-4 12B's text tower as google/gemma-4-12B's config.json gives it (LTX-2.5's prompt encoder).
GEMMA4_12B = dict(vocab_size=262144, hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
                  num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=1024,
                  final_logit_softcapping=30.0, max_position_embeddings=262144,
                  layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 8,
                  rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                      "rope_theta": 1000000.0},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


def test_full_size_gemma4_12b_and_ltx2_connectors():
    """The published architectures without weights: Gemma-4 12B's text tower and LTX-2.0's connectors (diffusers'
    defaults: 3840 x 49 features, 2 + 2 layers of 30 x 128, 128 registers) fill the vidax trees exactly."""
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors as Reference
    from transformers.models.gemma4_unified import configuration_gemma4_unified as c
    from transformers.models.gemma4_unified.modeling_gemma4_unified import Gemma4UnifiedTextModel

    from vidax_core.testing.reference import check_full_size

    text = c.Gemma4UnifiedTextConfig(**GEMMA4_12B)
    cfg = dl.DecoderLLMConfig.from_config(text.to_dict())
    assert cfg.head_dim_of(dl.FULL) == 512 and cfg.kv_heads(dl.FULL) == 1 and cfg.k_eq_v_types == (dl.FULL,)
    check_full_size(lambda: Gemma4UnifiedTextModel(text),
                    lambda t, flat: dl.convert_params(cfg, t, flat, component="text_encoder", check_only=True),
                    lambda: dl.DecoderLLM(cfg, rngs=nnx.Rngs(0)), component="text_encoder", ignore=dl.IGNORE,
                    label="gemma-4-12b text", params=(10e9, 13e9))
    ccfg = lc.LTX2ConnectorsConfig()
    assert ccfg.features_width == 3840 * 49
    check_full_size(Reference, lc.CONNECTOR_RULES, lambda: lc.LTX2TextConnectors(ccfg, rngs=nnx.Rngs(0)),
                    component="connectors", label="ltx-2 connectors")
