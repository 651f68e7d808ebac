"""Where the prompt encoder computes (``runtime.encode_on``) and the dry run's placement block."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import vidax
from vidax_core import cli
from vidax_core.runner import memory_plan as mp
from vidax_core.runner import throughput

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
FAST = ("sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
        "sampling.max_sequence_length=16")


def _cfg(encode_on="auto"):
    return SimpleNamespace(runtime=SimpleNamespace(encode_on=encode_on))


def test_auto_puts_an_encoder_that_does_not_fit_on_the_host_cpu(monkeypatch):
    peak = throughput.named("tpu-v5e")  # a named target: the local CPU backend is not what is planned
    monkeypatch.setattr(mp, "encoder_bytes", lambda *_a: int(22.8 * 2**30))  # UMT5-XXL at float32
    got = mp.encoder_placement(_cfg(), None, 0, peak)
    assert got.where == "cpu" and "exceed" in got.reason
    monkeypatch.setattr(mp, "encoder_bytes", lambda *_a: int(4 * 2**30))
    assert mp.encoder_placement(_cfg(), None, 0, peak).where == "device"
    # beside a placed denoiser of 12 GiB the same encoder no longer fits
    assert mp.encoder_placement(_cfg(), None, 12 * 2**30, peak).where == "cpu"
    assert mp.encoder_placement(_cfg("device"), None, 12 * 2**30, peak).where == "device"  # asked for


def test_encoding_on_the_cpu_backend_makes_the_same_video():
    with vidax.load(DEMO, *FAST) as pipe:
        dev = pipe()
    with vidax.load(DEMO, *FAST, "runtime.encode_on=cpu") as pipe:
        cpu = pipe()
    assert dev.metrics["text_encoder_on"] == "device" and cpu.metrics["text_encoder_on"] == "cpu"
    np.testing.assert_array_equal(np.asarray(cpu.latents), np.asarray(dev.latents))


@pytest.mark.parametrize("device,verdict", [("h200", "fits"), ("tpu-v5e", "fits")])
def test_dry_run_prints_the_placement(device, verdict, capfd):
    assert cli.main(["run", DEMO, "--dry-run", "--device", device, "offload.enabled=true"]) == 0
    out = capfd.readouterr().out
    lines = out[out.index("placement:"):].splitlines()
    assert lines[1].lstrip().startswith("text encoder") and "device, then freed" in lines[1]
    assert lines[2].lstrip().startswith("denoiser") and "device + pinned host" in lines[2]
    assert any(line.strip().startswith("peak per device") and line.endswith(verdict) for line in lines)
    assert any(line.strip().startswith("host memory ~") for line in lines)


def test_dry_run_names_the_keys_when_it_does_not_fit(capfd, monkeypatch):
    monkeypatch.setattr(mp, "device_budget", lambda peak=None: 1024)  # a device of 1 KiB
    assert cli.main(["run", DEMO, "--dry-run", "--device", "h200"]) == 0
    out = capfd.readouterr().out
    assert "does not fit: set offload.enabled=true" in out


@pytest.mark.parametrize("image", [None, "first_frame.png"])
def test_the_vae_row_counts_what_the_run_builds(image):
    """A run that encodes no image or clip builds its VAE decoder only: the dry run's VAE row counts those tensors
    (LTX-Video-13B's float32 VAE: 2.1 of its 4.65 GiB; the whole file made the host line 11% high)."""
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    folder = plugins.call("builtin_checkpoint", plugins.registry.get("wan2.1-t2v-1.3b"), name="tiny-random")
    ckpt = Checkpoint(folder)
    source = ckpt.read_tensors("vae")
    sizes = {k: int(np.prod(source.shape(k))) * 4 for k in source}  # every tensor of the tiny VAE is float
    decoder = sum(n for k, n in sizes.items() if not k.startswith(("encoder.", "quant_conv.")))
    assert 0 < decoder < sum(sizes.values())
    run = SimpleNamespace(image=image, video=None, options={})
    assert mp.vae_bytes(ckpt, run) == (sum(sizes.values()) if image else decoder)


@pytest.mark.parametrize("model_id, follows", [("cosmos-predict2.5-2b", True), ("wan2.1-t2v-1.3b", False)])
def test_encoders_are_sized_at_the_dtype_they_compute_in(model_id, follows):
    """An LLM encoder a model declares (``encoders_in_weight_dtype``) is built in the denoiser's weight dtype, bf16
    on a TPU: sized at float32 the dry run said 37.8 GiB for Cosmos-Predict2.5-14B's Reason1 on a v5e, twice what
    it holds. T5-type encoders compute in float32 everywhere."""
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    spec = plugins.registry.get(model_id)
    ckpt = Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny-random"))
    assert ("text_encoder" in spec.encoders_in_weight_dtype) is follows
    f32 = mp.component_bytes(ckpt, "text_encoder", as_float32=True)
    others = sum(mp.component_bytes(ckpt, c, as_float32=True) or 0 for c in mp.ENCODER_COMPONENTS[1:])
    for dtype, itemsize in (("bfloat16", 2), ("float32", 4)):
        cfg = SimpleNamespace(model=SimpleNamespace(dtype=dtype))
        want = f32 // 4 * (itemsize if follows else 4) + others
        assert mp.encoder_bytes(ckpt, spec, cfg) == want
        assert mp.encoder_dtype(spec, cfg) == (dtype if follows else "float32")
        # on the CPU backend a bf16 encoder's matmuls also hold a float32 copy of its weights
        on_cpu = f32 // 4 * (itemsize + 4 if follows and itemsize < 4 else 4) + others
        assert mp.encoder_bytes(ckpt, spec, cfg, cpu=True) == on_cpu
