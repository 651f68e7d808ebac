"""8-bit weights halve the denoiser's resident bytes (``output.metrics.peak_resident_weight_bytes``), its
offload chunks and its offloaded peak (two streamed chunks beside the resident non-block weights), on one device and
under TP 2; the 8-bit kernels and their scales split consistently under TP 2 (same video); the scale shards with the
kernel's output axis.

The tiny Wan here is wide enough (width 128, FFN 1024, 6 blocks) that its blocks hold most of its bytes, as in the
real models; the per-output-channel fp32 scales cost 4 bytes per channel (4 / in_features of a kernel). Its
non-block weights are about 0.4 of a block (Wan2.1-14B: 0.7), dominated, as in the real model, by the time
embedder and time projection, which Wan stores 8-bit too when asked (``model.quantize_outside_blocks``, the family's
vidax_wan.plugin.QUANTIZED_OUTSIDE_BLOCKS); by default quantization at load covers the blocks only.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import cli  # noqa: E402
from vidax_core.testing.devices import run_script  # noqa: E402

DIT = dict(num_attention_heads=2, attention_head_dim=64, ffn_dim=1024, num_layers=6)
RUN = ["model.id=wan2.1-t2v-1.3b", "model.dtype=bfloat16", "sampling.height=32", "sampling.width=32",
       "sampling.num_frames=5", "sampling.num_steps=2", "sampling.max_sequence_length=8", "output.path=null"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from vidax_core.testing.tiny.wan import save_tiny_wan

    return save_tiny_wan(tmp_path_factory.mktemp("wide") / "ckpt", dit=DIT)


def _run(ckpt, out, name, *extra):
    m, lat = out / f"{name}.json", out / f"{name}.npy"
    code = cli.main(["run", *RUN, f"model.checkpoint={ckpt}", f"output.metrics={m}", f"output.save_latents={lat}",
                     f"runtime.compilation_cache_dir={out / 'jc'}", *extra, "--quiet"])
    assert code == 0
    return json.loads(m.read_text()), np.load(lat)


@pytest.fixture(scope="module")
def runs(ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    off = ["offload.enabled=true", "offload.chunk_size=1"]
    more = ["model.weight_dtype=int8", "model.quantize_outside_blocks=true"]
    return {
        "bf16": _run(ckpt, out, "bf16"),
        "int8": _run(ckpt, out, "int8", *more),
        "int8-offload": _run(ckpt, out, "int8o", *more, *off),
        "bf16-offload": _run(ckpt, out, "bf16o", *off),
        "int8-blocks-offload": _run(ckpt, out, "int8b", "model.weight_dtype=int8", *off),
    }


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_resident_bytes_halved(runs):
    full, eight = runs["bf16"][0]["peak_resident_weight_bytes"], runs["int8"][0]["peak_resident_weight_bytes"]
    print(f"resident: int8 {eight} B / bf16 {full} B = {eight / full:.3f}")
    assert runs["int8"][0]["weight_storage"] == ["int8"] and runs["bf16"][0]["weight_storage"] == [None]
    assert eight <= 0.55 * full
    assert _rel(runs["int8"][1], runs["bf16"][1]) < 5e-2  # the same video, up to 8-bit rounding


def _bf16_block_bytes(ckpt):
    """Bytes of one bf16 block, from the model's abstract tree (what a bf16 offload chunk of 1 block holds)."""
    import jax.numpy as jnp

    from vidax_core.model_api import DitBuild
    from vidax_core.nn.state import abstract_model
    from vidax_core.report.dry_run import size_denoiser
    from vidax_wan.dit import WanDiT, WanDiTConfig

    cfg = WanDiTConfig.from_config(json.loads((ckpt / "transformer" / "config.json").read_text()), dtype=jnp.bfloat16)
    sizing = size_denoiser(abstract_model(DitBuild.of(WanDiT, cfg, in_channels=4).ctor)[2], {"blocks": cfg.num_layers})
    n, b = sizing.groups["blocks"]
    return b // n


def test_offload_streams_8bit_chunks(ckpt, runs):
    me, le = runs["int8-offload"]
    mf = runs["bf16-offload"][0]
    ce, cf = me["offload"]["chunk_weight_bytes"]["blocks"], _bf16_block_bytes(ckpt)
    pe, pf = me["peak_resident_weight_bytes"], mf["peak_resident_weight_bytes"]
    print(f"offload chunk of 1 block: int8 {ce} B / bf16 {cf} B = {ce / cf:.3f}; peak with offload int8 {pe} B / "
          f"bf16 {pf} B = {pe / pf:.3f} (non-block int8 {me['offload']['non_block_weight_bytes']} B / bf16 "
          f"{mf['offload']['non_block_weight_bytes']} B)")
    assert mf["offload"]["chunk_weight_bytes"]["blocks"] == cf  # the bf16 run streams the abstract tree's block
    assert ce <= 0.55 * cf
    assert pe == me["offload"]["non_block_weight_bytes"] + 2 * ce
    assert pe <= 0.55 * pf  # the offloaded run's device weights halve too, not only its chunks
    np.testing.assert_allclose(le, runs["int8"][1], rtol=0, atol=1e-5)  # streamed 8-bit = resident 8-bit


def test_at_load_quantization_covers_the_blocks_only_by_default(runs):
    """Without ``model.quantize_outside_blocks`` the non-block weights stay as the checkpoint stores them (bf16
    here: the same bytes as the bf16 run), while the streamed chunks are 8-bit all the same."""
    mb, mf, me = runs["int8-blocks-offload"][0], runs["bf16-offload"][0], runs["int8-offload"][0]
    assert mb["offload"]["non_block_weight_bytes"] == mf["offload"]["non_block_weight_bytes"]
    assert me["offload"]["non_block_weight_bytes"] < 0.8 * mf["offload"]["non_block_weight_bytes"]
    assert mb["offload"]["chunk_weight_bytes"] == me["offload"]["chunk_weight_bytes"]


_TP2 = """
import json, sys
from vidax_core import cli
ckpt, out, base, runs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
res = {}
for name, extra in runs.items():
    args = [*base, f"model.checkpoint={ckpt}", f"output.metrics={out}/tp_{name}.json",
            f"output.save_latents={out}/tp_{name}.npy", f"runtime.compilation_cache_dir={out}/jc", *extra, "--quiet"]
    assert cli.main(["run", *args]) == 0
    res[name] = json.load(open(f"{out}/tp_{name}.json"))["peak_resident_weight_bytes"]
print(json.dumps(res))
"""
_OFF = ["offload.enabled=true", "offload.chunk_size=1"]
_INT8 = ["model.weight_dtype=int8", "model.quantize_outside_blocks=true"]  # Wan's embedders 8-bit too
_TP_RUNS = {  # fp32 compute for the split check (TP's reductions then match one device to ~1e-6), bf16 for ratios
    "tp2": [*_INT8, "model.dtype=float32", "parallel.tp=2"],
    "tp1": [*_INT8, "model.dtype=float32", "parallel.tp=1"],
    "bf16": ["parallel.tp=2"],
    "int8": [*_INT8, "parallel.tp=2"],
    "bf16-offload": ["parallel.tp=2", *_OFF],
    "int8-offload": [*_INT8, "parallel.tp=2", *_OFF],
}


@pytest.fixture(scope="module")
def tp_runs(ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("tp")
    res = run_script(_TP2, str(ckpt), str(out), json.dumps(RUN), json.dumps(_TP_RUNS), devices=2,
                     python_args=("-c",), highest=True)
    return res, out


def _tp_split_bytes(ckpt):
    import jax.numpy as jnp

    from vidax_core.model_api import DitBuild
    from vidax_core.nn.state import abstract_model
    from vidax_core.parallel import sharding
    from vidax_core.quant import policy
    from vidax_core.quant.keep import DEFAULT_KEEP
    from vidax_wan.dit import WanDiT, WanDiTConfig
    from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS

    cfg = WanDiTConfig.from_config(json.loads((ckpt / "transformer" / "config.json").read_text()), dtype=jnp.float32)
    build = policy.apply(DitBuild.of(WanDiT, cfg, in_channels=4), "int8", DEFAULT_KEEP, QUANTIZED_OUTSIDE_BLOCKS)
    _, state, flat = abstract_model(build.ctor)
    specs = sharding.param_specs(state, sharding.make_rules(None))
    return sum(int(np.prod(flat[p].shape)) * np.dtype(flat[p].dtype).itemsize for p, sp in specs.items()
               if "tp" in tuple(sp))


def test_tp2_splits_8bit_kernels_and_scales(ckpt, tp_runs):
    res, out = tp_runs
    print(f"int8 weights, fp32 compute, per device: tp=2 {res['tp2']} B, tp=1 {res['tp1']} B")
    # every tp-sharded parameter (the 8-bit kernels of the column- and row-parallel layers, the column-parallel
    # scales and biases) is halved, nothing else: tp2 = tp1 - split/2, computed from the abstract tree
    assert res["tp1"] - res["tp2"] == _tp_split_bytes(ckpt) // 2
    # kernels and their scales split consistently: the TP run makes the single-device 8-bit video
    rel = _rel(np.load(out / "tp_tp2.npy"), np.load(out / "tp_tp1.npy"))
    print(f"tp=2 vs tp=1 latents: rel {rel:.2e}")
    assert rel < 1e-4


def test_tp2_bytes_halved_resident_and_offloaded(tp_runs):
    res, _ = tp_runs
    for setting in ("", "-offload"):
        eight, full = res["int8" + setting], res["bf16" + setting]
        print(f"tp=2{setting or ' resident'}, per device: int8 {eight} B / bf16 {full} B = {eight / full:.3f}")
        assert eight <= 0.55 * full, setting


def test_scale_shards_with_the_kernel_output_axis():
    from vidax_core.model_api import DitBuild
    from vidax_core.nn.state import abstract_model
    from vidax_core.parallel import sharding
    from vidax_core.quant import policy
    from vidax_core.quant.keep import DEFAULT_KEEP
    from vidax_wan.dit import WanDiT, WanDiTConfig

    from vidax_wan.dit import EMBED
    from vidax_core.testing.tiny.wan import TINY_DIT_CONFIG
    from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS

    cfg = WanDiTConfig.from_config(TINY_DIT_CONFIG)
    build = policy.apply(DitBuild.of(WanDiT, cfg, in_channels=4), "int8", DEFAULT_KEEP, QUANTIZED_OUTSIDE_BLOCKS)
    _, state, flat = abstract_model(build.ctor)
    specs = sharding.param_specs(state, sharding.make_rules(None))
    col, row = (None, None, "tp"), (None, "tp")  # (layers, in, out): output split / input split
    for layer, spec, scale_spec in (("attn1/to_q", col, col), ("attn1/to_out", row, ()),
                                    ("ffn/proj_in", col, col), ("ffn/proj_out", row, ())):
        path = ("blocks", *layer.split("/"))
        assert tuple(specs[path + ("kernel",)]) == spec
        assert tuple(specs[path + ("kernel_scale",)]) == scale_spec, layer
        assert flat[path + ("kernel_scale",)].shape[:2] == (cfg.num_layers, 1)
    # outside the blocks: one scale per output channel of the unstacked kernel, split as its output axis is (a rule
    # splitting the hidden axis, as FSDP does)
    assert flat[("time_proj", "kernel_scale")].shape == (1, flat[("time_proj", "kernel")].shape[-1])
    split = sharding.param_specs(state, sharding.make_rules([(EMBED, "fsdp")]))
    assert tuple(split[("time_proj", "kernel")]) == tuple(split[("time_proj", "kernel_scale")]) == (None, "fsdp")
    assert ("proj_out", "kernel_scale") not in flat and ("blocks", "norm2", "kernel_scale") not in flat
