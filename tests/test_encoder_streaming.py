"""Encoders whose layers stream from the checkpoint file a chunk at a time give the resident encoder's outputs, and
the run's encoder policy sets the dtype of towers built without one (vidax_core.encoders.policy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from vidax_core.encoders import decoder_llm as dl
from vidax_core.encoders.policy import EncoderPolicy, encoder_policy
from vidax_core.encoders.t5 import T5Config, call_encoder, encode_text, load_t5
from vidax_core.encoders.towers import encode_t5
from vidax_core.io.safetensors import SafetensorsFile, save_file
from vidax_core.parallel import streamed

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _random(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "embed" in name or "shared" in name else 0.15)
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def umt5(tmp_path_factory):
    cfg = transformers.UMT5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=4, num_heads=4,
                                  relative_attention_num_buckets=8, relative_attention_max_distance=16,
                                  feed_forward_proj="gated-gelu", dropout_rate=0.0)
    path = tmp_path_factory.mktemp("umt5") / "model.safetensors"
    save_file(_random(transformers.UMT5EncoderModel(cfg).eval(), 0), str(path))
    return cfg.to_dict(), str(path)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    cfg = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=6, sliding_window=4, max_position_embeddings=64,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])
    path = tmp_path_factory.mktemp("gemma") / "model.safetensors"
    save_file(_random(transformers.Gemma3TextModel(cfg).eval(), 1), str(path))
    return cfg.to_dict(), str(path)


def _ids(n=10):
    rng = np.random.default_rng(0)
    ids = rng.integers(2, 60, (2, n)).astype(np.int32)
    mask = np.ones((2, n), np.int32)
    mask[0, 6:] = 0
    return ids, mask


def _block_leaves(model, path):
    node = model
    for k in path:
        node = node[k] if isinstance(k, int) else getattr(node, k)
    return jax.tree.leaves(nnx.state(node))


@pytest.mark.parametrize("layers", [1, 2, 4])
def test_a_streamed_umt5_gives_the_resident_outputs(umt5, layers):
    config, path = umt5
    cfg = T5Config.from_config(config)
    resident = load_t5(cfg, SafetensorsFile(path))
    reads = []
    source = SafetensorsFile(path)
    counted = type("Counted", (dict,), {"__getitem__": lambda self, k: reads.append(k) or source[k]})(
        {k: None for k in source})
    with encoder_policy(EncoderPolicy(stream_layers=layers)):
        stream = load_t5(cfg, counted)
    loaded = len(reads)
    assert streamed.is_streamed(stream) and not streamed.is_streamed(resident)
    leaves = _block_leaves(stream, ("blocks",))
    assert leaves and all(isinstance(a, jax.ShapeDtypeStruct) for a in leaves)  # no layer held anywhere
    ids, mask = _ids()
    for fn in (lambda m: encode_text(m, ids, mask, 12), lambda m: call_encoder(m, ids),
               lambda m: encode_t5(m, ids, mask)):
        want, got = np.asarray(fn(resident)), np.asarray(fn(stream))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    per_layer = sum(1 for k in reads[:loaded] if ".block.0." in k)  # tensors of one layer read at load
    n = 4 // layers  # each call reads every layer's tensors once; the executor's second run also times one chunk's
    assert len(reads) - loaded == (3 * 4 + (n > 1) * layers) * per_layer  # transfer alone (its overlap figure)


@pytest.mark.parametrize("layers", [1, 2, 4])
def test_a_streamed_gemma_gives_every_resident_hidden_state(gemma, layers):
    config, path = gemma
    cfg = dl.DecoderLLMConfig.from_config(config)
    resident = dl.load_decoder_llm(cfg, SafetensorsFile(path))
    with encoder_policy(EncoderPolicy(stream_layers=layers)):
        stream = dl.load_decoder_llm(cfg, SafetensorsFile(path))
    assert streamed.is_streamed(stream)
    ids, mask = _ids(12)
    want = np.asarray(dl.hidden_states(resident, ids, mask))
    got = np.asarray(dl.hidden_states(stream, ids, mask))
    assert got.shape == want.shape == (5, 2, 12, 32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_the_policy_sets_the_dtype_of_towers_built_without_one(umt5):
    config, _ = umt5
    assert T5Config.from_config(config).dtype == np.float32
    with encoder_policy(EncoderPolicy(dtype=jnp.bfloat16)):
        assert T5Config.from_config(config).dtype == ml_dtypes.bfloat16
        assert T5Config.from_config(config, dtype=jnp.float32).dtype == np.float32  # explicit wins
        from vidax_core.encoders.vit import ViTConfig

        assert ViTConfig.clip_text({"hidden_size": 32, "num_attention_heads": 4}).dtype == ml_dtypes.bfloat16
    assert T5Config.from_config(config).dtype == np.float32


def test_a_loaded_pipe_streaming_its_encoder_makes_the_resident_video():
    """``runtime.encode_on=stream``: the same video as the resident encoder, across calls of a loaded pipe (the
    encoder parked on the host between them keeps its streams), and the metrics say where and in which dtype."""
    import os

    import vidax

    demo = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
    fast = ("sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5")
    with vidax.load(demo, *fast) as pipe:
        want = [np.asarray(pipe(prompt=p).latents) for p in ("a cat", "a dog")]
    with vidax.load(demo, *fast, "runtime.encode_on=stream") as pipe:
        got = [pipe(prompt=p) for p in ("a cat", "a dog")]
    info = got[1].metrics["text_encoders"]
    assert info["where"] == "stream" and info["layers_per_chunk"] == 1 and info["dtypes"] == {"encoder": "float32"}
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g.latents), w, rtol=1e-5, atol=1e-5)


def test_a_tensor_read_from_a_checkpoint_maps_only_its_bytes_while_it_lives(tmp_path):
    """Each tensor is a map of its own bytes, gone with the array: a placed weight keeps no page of its file in
    the process (a whole-file map under gVisor made the whole file resident on the first read)."""
    import gc

    path = str(tmp_path / "w.safetensors")
    save_file({"a": np.arange(3 << 18, dtype=np.float32), "b": np.ones((1 << 20,), np.float32)}, path)

    def maps():
        with open("/proc/self/maps") as f:
            return [line for line in f if line.rstrip().endswith(path)]

    f = SafetensorsFile(path)
    a = f["a"]
    assert a[-1] == (3 << 18) - 1 and not a.flags.writeable
    (held,) = maps()
    lo, hi = (int(x, 16) for x in held.split()[0].split("-"))
    assert hi - lo < (3 << 20) + (1 << 16)  # tensor a's 3 MiB (from a page boundary), not the file's 7 MiB
    del a
    gc.collect()
    assert maps() == []
