"""Decoder-LLM text encoder base against transformers on tiny random models (CPU).

Llama with llama3 RoPE scaling, Qwen2.5-VL's text model with mRoPE, Gemma-3 text with mixed sliding / full layers
on a sequence longer than the window, Gemma-2 (SANA-Video's encoder: alternating sliding / full layers, soft-capped
attention logits, no q/k norm, a query scale of its own): every hidden state in fp32 with left and right padding
(tolerance from the reference's own fp32-vs-fp64 error), bf16 vidax vs the fp32 reference within the reference's
own bf16 error, hidden-layer selection and crop_start, checkpoint key layouts, and chat templates against
apply_chat_template.
"""

from __future__ import annotations

import copy
import functools
import json

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.chat_template import load_chat_template, render_chat, special_tokens
from vidax_core.io.convert import ConversionError
from vidax_core.testing.parity import assert_fp32_parity, fp32_error

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB, SEQ = 96, 12
FP32_FACTOR = 4.0  # vidax fp32 vs reference fp64 may be this many times both implementations' own fp32 errors
BF16_FACTOR = 2.0  # vidax bf16 vs reference fp32 may be this many times the reference's own bf16 error


def _llama():
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, attention_bias=True, mlp_bias=True, max_position_embeddings=128,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
    )
    return cfg, transformers.LlamaModel


def _qwen():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as m
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig

    cfg = Qwen2_5_VLTextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [1, 1, 2]},
    )
    return cfg, m.Qwen2_5_VLTextModel


def _gemma():
    cfg = transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=6, sliding_window=4, max_position_embeddings=128,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    )
    return cfg, transformers.Gemma3TextModel


def _gemma2():
    cfg = transformers.Gemma2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=6, sliding_window=6, max_position_embeddings=128,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0, attention_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
    )
    return cfg, transformers.Gemma2Model


MODELS = {"llama": _llama, "qwen": _qwen, "gemma": _gemma, "gemma2": _gemma2}


@functools.lru_cache(maxsize=None)
def _build(name: str):
    """(name, transformers config dict, torch model fp32, state dict as numpy); every parameter random."""
    hf_cfg, cls = MODELS[name]()
    torch.manual_seed(0)
    model = cls(hf_cfg).eval().float()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "embed" in pname else 0.15)
            if "norm" in pname and not name.startswith("gemma"):  # x * w: gains near 1; Gemma's (1 + w) already is
                p.add_(1.0)
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return name, hf_cfg.to_dict(), model, sd


@pytest.fixture(scope="module", params=sorted(MODELS))
def reference(request):
    return _build(request.param)


def _batch(side: str):
    rng = np.random.default_rng(1)
    seqs = [rng.integers(1, VOCAB, size=n).tolist() for n in (SEQ, 7)]
    return dl.pad_batch(seqs, pad_id=0, length=SEQ, side=side)


def _mrope_positions(mask):
    """Three different position streams (as for an image in the prompt), so mRoPE's sections matter."""
    t = np.broadcast_to(np.arange(SEQ), mask.shape)
    return np.stack([t, t // 2, (t * 3) % 5]).astype(np.int64)


def _torch_hidden(model, ids, mask, pos, dtype):
    model = copy.deepcopy(model).to(dtype)  # a bf16 round trip would round the fp32 reference's weights
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long(),
            position_ids=None if pos is None else torch.from_numpy(pos).long(), output_hidden_states=True,
        )
    return np.stack([h.double().numpy() for h in out.hidden_states])


def _valid(h, mask):
    """Only non-padding rows: a padding query's output is unused and its value a convention."""
    return h[:, mask.astype(bool)]


def test_config_from_transformers_dict(reference):
    name, cfg_dict, _, _ = reference
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    assert (cfg.hidden_size, cfg.head_dim, cfg.num_key_value_heads) == (32, 8, 2)
    if name == "llama":
        spec = cfg.rope_spec(dl.FULL)
        assert spec.rope_type == "llama3" and spec.original_max_position_embeddings == 16
        assert cfg.attention_bias and cfg.mlp_bias
    if name == "qwen":
        assert cfg.qkv_bias and not cfg.attention_bias and cfg.rope_spec(dl.FULL).mrope_section == (1, 1, 2)
    if name == "gemma":
        assert cfg.layer_types == (dl.SLIDING, dl.FULL, dl.SLIDING, dl.FULL) and cfg.sliding_window == 4
        assert cfg.rope_spec(dl.FULL).rope_type == "linear" and cfg.rope_spec(dl.SLIDING).theta == 10000.0
        assert cfg.gemma_norm and cfg.sandwich_norms and cfg.qk_norm and cfg.query_pre_attn_scalar == 6
    if name == "gemma2":  # alternating from a sliding first layer, one RoPE, capped logits, no q/k norm
        assert cfg.layer_types == (dl.SLIDING, dl.FULL) * 2 and cfg.sliding_window == 6
        assert cfg.rope_spec(dl.FULL) == cfg.rope_spec(dl.SLIDING) and cfg.rope_spec(dl.FULL).theta == 1000.0
        assert cfg.gemma_norm and cfg.sandwich_norms and not cfg.qk_norm and cfg.query_pre_attn_scalar == 6
        assert cfg.attn_logit_softcapping == 2.0 and cfg.attention_bias


@pytest.mark.parametrize("side", ["right", "left"])
def test_every_hidden_state_matches_transformers_fp32(reference, side):
    name, cfg_dict, model, sd = reference
    if name == "gemma2" and side == "left":
        pytest.skip("transformers' eager Gemma-2 in float64 gives NaN on fully masked (left-padding) query rows, "
                    "which 0 x NaN then spreads to every row: no float64 truth; SANA-Video pads on the right")
    ids, mask = _batch(side)
    pos = _mrope_positions(mask) if name == "qwen" else None
    want64 = _valid(_torch_hidden(model, ids, mask, pos, torch.float64), mask)
    want32 = _valid(_torch_hidden(model, ids, mask, pos, torch.float32), mask)
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    got = np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, sd), ids, mask, pos))
    assert got.dtype == np.float32 and got.shape == (cfg_dict["num_hidden_layers"] + 1, 2, SEQ, 32)
    got = _valid(got, mask)
    print(f"{name} {side}-padded fp32 per hidden state vs fp64: "
          + " ".join(f"{np.abs(g - w).max():.1e}" for g, w in zip(got, want64)))

    def vidax(weights):
        return _valid(np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, weights), ids, mask, pos)), mask)

    assert_fp32_parity(f"{name} {side}-padded fp32", got, want32, want64, vidax_err=fp32_error(vidax, sd, base=got),
                       factor=FP32_FACTOR)


def test_bf16_within_reference_bf16_error(reference):
    name, cfg_dict, model, sd = reference
    ids, mask = _batch("right")
    pos = _mrope_positions(mask) if name == "qwen" else None
    want32 = _valid(_torch_hidden(model, ids, mask, pos, torch.float32), mask)
    ref16 = _valid(_torch_hidden(model, ids, mask, pos, torch.bfloat16), mask)
    enc = dl.load_decoder_llm(dl.DecoderLLMConfig.from_config(cfg_dict, dtype=jnp.bfloat16), sd)
    assert enc.embed_tokens[...].dtype == jnp.bfloat16
    got = _valid(np.asarray(dl.hidden_states(enc, ids, mask, pos)), mask)
    # per hidden state, relative to that state's scale (norm outputs and residuals differ in size)
    for i, (g, w, r) in enumerate(zip(got, want32, ref16)):
        err, ref_err = np.abs(g - w).max(), np.abs(r - w).max()
        print(f"{name} bf16 hidden_states[{i}]: vidax {err:.3e}, "
              f"reference bf16 {ref_err:.3e} (scale {np.abs(w).max():.2f})")
        assert err <= BF16_FACTOR * ref_err, (i, err, ref_err)


def test_layer_selection_and_crop_start(reference):
    """HunyuanVideo: hidden_states[-3] of the templated prompt, first crop_start tokens dropped."""
    name, cfg_dict, model, sd = reference
    ids, mask = _batch("right")
    pos = _mrope_positions(mask) if name == "qwen" else None
    want = _torch_hidden(model, ids, mask, pos, torch.float32)
    enc = dl.load_decoder_llm(dl.DecoderLLMConfig.from_config(cfg_dict), sd)
    emb, m = dl.encode(enc, ids, mask, layers=-3, crop_start=5, position_ids=pos)
    assert emb.shape == (2, SEQ - 5, 32) and np.array_equal(np.asarray(m), mask[:, 5:])
    keep = mask[:, 5:].astype(bool)
    np.testing.assert_allclose(np.asarray(emb)[keep], want[-3][:, 5:][keep], atol=1e-4, rtol=1e-4)
    every, _ = dl.encode(enc, ids, mask, layers="all", position_ids=pos)
    assert every.shape == (cfg_dict["num_hidden_layers"] + 1, 2, SEQ, 32)
    pair, _ = dl.encode(enc, ids, mask, layers=[0, -1], position_ids=pos)
    np.testing.assert_array_equal(np.asarray(pair), np.asarray(every)[[0, -1]])


def test_qwen_text_positions_equal_get_rope_index():
    """Text-only Qwen2.5-VL positions (skip padding) equal transformers' get_rope_index."""
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    ids, mask = _batch("left")
    vision = type("V", (), {"spatial_merge_size": 2, "tokens_per_second": 2})()
    fake = type("M", (), {"config": type("C", (), {"vision_config": vision})()})()
    want, _ = Qwen2_5_VLModel.get_rope_index(fake, torch.from_numpy(ids).long(),
                                             torch.zeros(ids.shape, dtype=torch.int32),
                                             attention_mask=torch.from_numpy(mask).long())
    got = np.asarray(dl.text_position_ids(mask))
    for stream in want.numpy():
        np.testing.assert_array_equal(stream, got)


def test_checkpoint_layouts_and_errors(reference):
    name, cfg_dict, _, sd = reference
    cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    ids, mask = _batch("right")
    pos = _mrope_positions(mask) if name == "qwen" else None
    base = np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, sd), ids, mask, pos))
    prefix = {"llama": "language_model.model.", "qwen": "model.language_model.", "gemma": "model.language_model.",
              "gemma2": "model."}
    wrapped = {prefix[name] + k: v for k, v in sd.items()}
    wrapped["lm_head.weight"] = np.zeros((VOCAB, 32), np.float32)
    wrapped["model.visual.blocks.0.attn.qkv.weight"] = np.zeros((3, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, wrapped), ids, mask, pos)), base)
    broken = {k: v for k, v in sd.items() if k != "layers.1.mlp.up_proj.weight"}
    broken["layers.9.mlp.up_proj.weight"] = sd["layers.1.mlp.up_proj.weight"]
    broken["norm.weight"] = np.ones((31,), np.float32)
    with pytest.raises(ConversionError) as e:
        dl.load_decoder_llm(cfg, broken)
    msg = str(e.value)
    assert "1 missing" in msg and "up_proj" in msg and "layers.9" in msg and "mis-shaped" in msg


def test_loads_save_pretrained_folder(reference, tmp_path):
    """config.json + model.safetensors as transformers writes them, read by the core's safetensors reader."""
    from vidax_core.io.checkpoint import TensorSource

    name, cfg_dict, model, sd = reference
    model.save_pretrained(tmp_path)
    cfg = dl.DecoderLLMConfig.from_config(json.loads((tmp_path / "config.json").read_text()))
    assert cfg == dl.DecoderLLMConfig.from_config(cfg_dict)
    tensors = TensorSource(sorted(str(p) for p in tmp_path.glob("*.safetensors")))
    ids, mask = _batch("right")
    pos = _mrope_positions(mask) if name == "qwen" else None
    got = np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, tensors), ids, mask, pos))
    np.testing.assert_array_equal(got, np.asarray(dl.hidden_states(dl.load_decoder_llm(cfg, sd), ids, mask, pos)))


OLD_STYLE = {  # config.json fields as the released checkpoints (written by transformers 4.x) have them
    "llama": dict(model_type="llama", rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}),
    "qwen": dict(model_type="qwen2_5_vl", rope_theta=1000000.0,
                 rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
    "gemma": dict(model_type="gemma3_text", rope_theta=1000000.0, rope_local_base_freq=10000.0, sliding_window=4,
                  sliding_window_pattern=2, query_pre_attn_scalar=6,
                  rope_scaling={"rope_type": "linear", "factor": 8.0}),
    # gemma-2-2b-it's config.json: no layer_types, the soft-capping fields and the window written out
    "gemma2": dict(model_type="gemma2", rope_theta=10000.0, sliding_window=4, query_pre_attn_scalar=6,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh",
                   cache_implementation="hybrid"),
}


@pytest.mark.parametrize("name", sorted(OLD_STYLE))
def test_old_style_rope_fields_read_as_transformers_reads_them(name):
    old = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, head_dim=8, **OLD_STYLE[name])
    cls = {"llama": transformers.LlamaConfig, "gemma": transformers.Gemma3TextConfig,
           "gemma2": transformers.Gemma2Config}.get(name)
    if cls is None:
        from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig as cls
    via_transformers = cls(**{k: v for k, v in old.items() if k != "model_type"}).to_dict()
    got = dl.DecoderLLMConfig.from_config(old)
    assert got == dl.DecoderLLMConfig.from_config(via_transformers)
    if name == "gemma":
        assert got.layer_types == (dl.SLIDING, dl.FULL) * 2 and got.rope_spec(dl.FULL).factor == 8.0
    if name == "gemma2":
        assert got.layer_types == (dl.SLIDING, dl.FULL) * 2 and got.attn_logit_softcapping == 50.0
    assert got.rope_spec(dl.FULL).rope_type == {"llama": "llama3", "qwen": "default", "gemma": "linear",
                                                "gemma2": "default"}[name]


def test_config_errors_name_the_field():
    with pytest.raises(dl.UserError, match="hidden_size"):
        dl.DecoderLLMConfig.from_config({"model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2})
    with pytest.raises(dl.UserError, match="not a supported decoder LLM"):
        dl.DecoderLLMConfig.from_config({"model_type": "bert"})


def test_per_type_kv_heads_run_as_separate_stacks():
    """A Gemma-4-like layout: full layers with 1 KV head, sliding layers with 2, i.e. two stacked trees scanned
    in four segments. Grouped attention with one KV head equals two identical KV heads, so it must give what the
    one-stack Gemma-3 model gives with each full layer's KV head duplicated."""
    _, cfg_dict, _, sd = _build("gemma")
    one_cfg = dl.DecoderLLMConfig.from_config(cfg_dict)
    two_cfg = dl.DecoderLLMConfig.from_config(cfg_dict, kv_heads_per_type=((dl.FULL, 1),))
    assert len(one_cfg.kinds) == 1 and len(two_cfg.kinds) == 2
    where, segments = dl.layer_plan(two_cfg)
    assert where == ((0, 0), (1, 0), (0, 1), (1, 1)) and len(segments) == 4
    single, dup = dict(sd), dict(sd)
    for i, t in enumerate(one_cfg.layer_types):
        if t == dl.FULL:
            for p in ("k_proj", "v_proj"):
                head = sd[f"layers.{i}.self_attn.{p}.weight"][:8]
                single[f"layers.{i}.self_attn.{p}.weight"] = head
                dup[f"layers.{i}.self_attn.{p}.weight"] = np.concatenate([head, head])
    ids, mask = _batch("left")
    two = dl.load_decoder_llm(two_cfg, single)
    assert two.kinds[1].self_attn.k_proj.kernel[...].shape == (2, 32, 8)
    got = np.asarray(dl.hidden_states(two, ids, mask))
    want = np.asarray(dl.hidden_states(dl.load_decoder_llm(one_cfg, dup), ids, mask))
    err = np.abs(got - want).max()
    print(f"two-kind layout vs one stack: max abs {err:.3e}")
    np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), rtol=0)


def test_chat_template_matches_apply_chat_template(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    special = ["<unk>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<pad>"]
    tok.train_from_iterator(["a cat walks on the beach", "describe the video in detail", "system user assistant"],
                            trainers.BpeTrainer(vocab_size=120, special_tokens=special))
    template = (  # Llama-3 instruct's template (HunyuanVideo's text encoder)
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
        " + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    )
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                              eos_token="<|eot_id|>", pad_token="<pad>", unk_token="<unk>")
    hf.chat_template = template
    hf.save_pretrained(tmp_path)
    messages = [{"role": "system", "content": "Describe the video in detail. "},
                {"role": "user", "content": "a cat walks on the beach"}]
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    loaded = load_chat_template(tmp_path)
    assert loaded == template
    for gen in (False, True):
        want = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        got = render_chat(loaded, messages, add_generation_prompt=gen, special=special_tokens(cfg))
        assert got == want
        want_ids = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen)
        want_ids = want_ids["input_ids"] if isinstance(want_ids, dict) or hasattr(want_ids, "keys") else want_ids
        assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(got, add_special_tokens=False).ids \
            == list(want_ids)
    assert got.startswith("<|begin_of_text|><|start_header_id|>system")
    assert got.endswith("assistant<|end_header_id|>\n\n")
    assert dl.padding_side(cfg) == hf.padding_side == "right"
    assert dl.padding_side({"padding_side": "left"}) == "left"
    # a template given by the family; raise_exception reaches the caller
    with pytest.raises(Exception, match="only user"):
        render_chat("{% if messages[0]['role'] != 'user' %}{{ raise_exception('only user') }}{% endif %}", messages)
