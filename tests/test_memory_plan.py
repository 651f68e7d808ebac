"""Where the prompt encoders compute (``runtime.encode_on``), in which dtype, and the dry run's placement block."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

import vidax
from vidax_core import cli
from vidax_core.placement import memory_plan as mp
from vidax_core.report import throughput

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
FAST = ("sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
        "sampling.max_sequence_length=16")


def _cfg(encode_on="auto", storage="host"):
    return SimpleNamespace(runtime=SimpleNamespace(encode_on=encode_on), model=SimpleNamespace(dtype="bfloat16"),
                           offload=SimpleNamespace(enabled=True, storage=storage))


# UMT5-XXL in bf16: 24 layers of 386 MiB and a 2.0 GiB embedding table
UMT5_XXL = [mp.EncoderSize("text_encoder", 2 * 2**30 + 24 * 386 * 2**20, 386 * 2**20, 24, True)]


def test_auto_places_streams_or_moves_an_encoder_to_the_host_cpu(monkeypatch):
    peak = throughput.named("tpu-v5e")  # a named target: the local CPU backend is not what is planned
    monkeypatch.setattr(mp, "encoder_sizes", lambda *_a: UMT5_XXL)
    got = mp.encoder_placement(_cfg(), None, 0, peak)  # 11.0 GiB fit the v5e's 15.7 beside nothing
    assert got.where == "device" and got.device_bytes == UMT5_XXL[0].total
    # beside a placed denoiser of 8 GiB it no longer fits whole: streamed, the most layers per chunk that fit
    got = mp.encoder_placement(_cfg(), None, 8 * 2**30, peak)
    room = int(mp.MARGIN * mp.device_budget(peak)) - 8 * 2**30
    assert got.where == "stream" and got.device_bytes <= room
    assert UMT5_XXL[0].device_bytes(got.layers_per_chunk + 1) > room or got.layers_per_chunk * 386 * 2**20 > 2**31
    # beside 12 GiB not even its embedding and two layers fit: the host CPU
    assert mp.encoder_placement(_cfg(), None, 12 * 2**30, peak).where == "cpu"
    assert mp.encoder_placement(_cfg("device"), None, 12 * 2**30, peak).where == "device"  # asked for
    assert mp.encoder_placement(_cfg("stream"), None, 0, peak).where == "stream"
    # a tower that does not stream its layers (CLIP) goes to the host CPU when it does not fit
    monkeypatch.setattr(mp, "encoder_sizes", lambda *_a: [mp.EncoderSize("text_encoder", 15 * 2**30, 2**28, 48)])
    assert mp.encoder_placement(_cfg(), None, 0, peak).where == "cpu"


def test_on_the_cpu_backend_an_offloaded_run_streams_the_encoder(monkeypatch):
    monkeypatch.setattr(mp, "encoder_sizes", lambda *_a: UMT5_XXL)
    plain = _cfg()
    plain.offload.enabled = False
    assert mp.encoder_placement(plain, None, 0).where == "device"  # the devices are host memory
    for storage in ("host", "disk"):
        got = mp.encoder_placement(_cfg(storage=storage), None, 0)
        assert got.where == "stream" and got.layers_per_chunk == 1 and "offload.enabled" in got.reason


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


def test_dry_run_names_the_part_and_a_key_not_set_when_it_does_not_fit(capfd, monkeypatch):
    monkeypatch.setattr(mp, "device_budget", lambda peak=None: 1024)  # a device of 1 KiB
    assert cli.main(["run", DEMO, "--dry-run", "--device", "h200"]) == 0
    out = capfd.readouterr().out
    # the run tiles a decode that does not fit untiled, so the advice is the next key: smaller tiles
    assert "the run tiles it: the untiled decode does not fit" in out
    assert "(decode) of 1.0 KiB: does not fit: the largest part at that moment is the vae decode" in out
    assert "smaller tiles: vae.tiling={tile_sample_min_height: 128" in out
    # with tiling set, the advice names no key already set
    assert cli.main(["run", DEMO, "--dry-run", "--device", "h200", "vae.tiling=true", "offload.enabled=true"]) == 0
    out = capfd.readouterr().out
    verdict = next(line for line in out.splitlines() if "peak per device" in line)
    assert "does not fit" in verdict and "vae.tiling=true" not in verdict and "offload.enabled=true" not in verdict


def test_the_host_line_refuses_a_run_that_does_not_fit(capfd, monkeypatch):
    """A run whose placement needs more host memory than the machine has stops before reading a weight, one line
    naming the part and the key; the dry run says the same for a host the user names."""
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=64 << 10))
    assert cli.main(["run", DEMO, *FAST, "output.path=/tmp/vidax-refused.mp4", "output.metrics=null"]) == 2
    err = [line for line in capfd.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and err[0].startswith("error: this run needs ~") and "the largest part" in err[0]
    assert not os.path.exists("/tmp/vidax-refused.mp4")
    monkeypatch.undo()
    assert cli.main(["run", DEMO, "--dry-run", "--host-memory", "0.0001"]) == 0
    line = next(x for x in capfd.readouterr().out.splitlines() if x.strip().startswith("host memory"))
    assert "named (--host-memory): does not fit: the largest part" in line


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


@pytest.mark.parametrize("model_id", ["cosmos-predict2.5-2b", "wan2.1-t2v-1.3b"])
def test_encoders_are_sized_at_the_dtype_they_compute_in(model_id):
    """Every prompt and image encoder computes in the run's compute dtype, bf16 on a TPU (sized at float32 the dry
    run said 37.8 GiB for Cosmos-Predict2.5-14B's Reason1 on a v5e, twice what it holds); each streaming tower's
    largest layer and depth come from its keys."""
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    spec = plugins.registry.get(model_id)
    ckpt = Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny-random"))
    f32 = sum(mp.component_bytes(ckpt, c, as_float32=True) or 0 for c in mp.ENCODER_COMPONENTS)
    for dtype, itemsize in (("bfloat16", 2), ("float32", 4)):
        cfg = SimpleNamespace(model=SimpleNamespace(dtype=dtype))
        assert mp.encoder_bytes(ckpt, spec, cfg) == f32 // 4 * itemsize
        assert mp.encoder_dtype(spec, cfg) == dtype
        # on the CPU backend a bf16 encoder's matmuls also hold a float32 copy of its weights
        assert mp.encoder_bytes(ckpt, spec, cfg, cpu=True) == f32 // 4 * (itemsize + 4 if itemsize < 4 else 4)
        (text,) = [e for e in mp.encoder_sizes(ckpt, spec, cfg) if e.component == "text_encoder"]
        c = ckpt.config("text_encoder")
        c = c.get("text_config", c)
        layers = int(c.get("num_hidden_layers") or c["num_layers"])
        assert text.streams and text.depth == layers and 0 < text.largest_layer * layers < text.total


def test_one_call_per_guidance_branch_halves_the_activations_and_makes_the_same_video(capfd):
    """``runtime.batch_branches=false``: classifier-free guidance's two branches run as two model calls of batch 1
    (as diffusers' Wan pipeline runs them): the dry run's activations are exactly half, its advice names the key
    while it is unset, and the video is the batched one (float32 rounding apart)."""
    from vidax_core.guidance import ClassifierFree
    from vidax_core.runner.step import plan_batches

    ctx = [np.zeros((1, 4, 8), np.float32)] * 2
    assert plan_batches(ClassifierFree(5.0), ctx)[0] == (("cond", "uncond"),)
    assert plan_batches(ClassifierFree(5.0), ctx, together=False)[0] == (("cond",), ("uncond",))

    def activations(*keys):
        assert cli.main(["run", DEMO, "--dry-run", "--device", "tpu-v5e", *keys]) == 0
        out = capfd.readouterr().out
        line = next(x for x in out.splitlines() if x.startswith("activations:"))
        row = next(x for x in out.splitlines() if x.strip().startswith("activations "))
        return float(line.split("~")[1].split()[0]), line, row

    batched, line, row = activations()
    split, line1, row1 = activations("runtime.batch_branches=false")
    assert "batch 2 over dp=1" in line and "batch 1 over dp=1" in line1
    assert split == pytest.approx(batched / 2, rel=0.01)
    assert "runtime.batch_branches=false" not in row  # shown only as advice when a part does not fit
    with vidax.load(DEMO, *FAST) as pipe:
        one = pipe()
    with vidax.load(DEMO, *FAST, "runtime.batch_branches=false") as pipe:
        two = pipe()
    np.testing.assert_allclose(np.asarray(two.latents), np.asarray(one.latents), rtol=0, atol=1e-5)


def test_a_peak_at_the_edge_of_the_device_is_not_called_a_fit():
    """Wan2.1-14B at 720p on the v5e: the dry run said 15.7 of 15.75 GiB "fits", and the second step's program
    failed to load. Within 5% of the device the verdict says so, with the advice."""
    plan = mp.Placement(budget=100 << 20)
    plan.add("activations", "device", 97 << 20, phases="denoise", device_key="runtime.batch_branches=false")
    verdict = next(x for x in plan.lines(mp.fmt_bytes) if "peak per device" in x)
    assert "at the edge: may not fit" in verdict and "runtime.batch_branches=false" in verdict
    plan.rows[0].device = 94 << 20
    assert next(x for x in plan.lines(mp.fmt_bytes) if "peak per device" in x).endswith(": fits")


def test_the_process_line_leaves_the_device_runtime_to_its_own_row(monkeypatch):
    """On the v5e's host (gVisor: no RssAnon) the dry run ran after the TPU runtime started, took the process's
    13.6 GiB of resident memory (the runtime's ~13.3 in it) and added the runtime's 14.0 GiB again: 39.0 GiB said,
    32.2 held. The runtime is counted once, as its row."""
    from jax._src import xla_bridge

    from vidax_core.report import dry_run, memory

    monkeypatch.setattr(memory, "anon_mb", lambda: None)
    monkeypatch.setattr(memory, "rss_mb", lambda: 13.6 * 1024)
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: True)
    monkeypatch.setattr(dry_run.jax, "default_backend", lambda: "tpu")
    monkeypatch.setattr(memory, "runtime_mb", lambda: 13.3 * 1024)
    assert dry_run.process_bytes(False, 14 << 30) == dry_run.PROCESS_FLOOR  # 0.3 GiB of its own, the floor
    monkeypatch.setattr(memory, "rss_mb", lambda: 16.3 * 1024)
    assert dry_run.process_bytes(False, 14 << 30) == int(3.0 * 2**30)
    monkeypatch.setattr(memory, "runtime_mb", lambda: None)  # not measured: the table's runtime figure
    assert dry_run.process_bytes(False, 14 << 30) == int((16.3 - 14.0) * 2**30)
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: False)  # runtime not started: all ours
    assert dry_run.process_bytes(False, 14 << 30) == int(16.3 * 2**30)


def test_the_runtime_is_measured_before_a_check_starts_it(monkeypatch):
    """On the v5e the runs' metrics said nothing of the runtime's ~14 GB: checking an explicit
    ``sampling.scheduler`` builds its arrays on the device, which started the runtime before it was measured."""
    from vidax_core.errors import UserError
    from vidax_core.report import memory
    from vidax_core.runner import loaded

    order = []

    def checked(*_a, **_k):
        order.append("checked")
        raise UserError("stop here")

    monkeypatch.setattr(memory, "start_backend", lambda: order.append("measured"))
    monkeypatch.setattr(loaded, "preflight", checked)
    with pytest.raises(UserError, match="stop here"):
        vidax.load(DEMO, *FAST, "sampling.scheduler=unipc")
    assert order == ["measured", "checked"]


def test_a_decode_that_will_not_fit_is_said_before_sampling(capfd, monkeypatch):
    """HunyuanVideo-1.5 480p on the v5e sampled for minutes, then its decode failed: the run now says so first."""
    monkeypatch.setattr(mp, "device_budget", lambda peak=None: 1 << 20)  # a device of 1 MiB
    with vidax.load(DEMO, *FAST, "output.path=null", quiet=False) as pipe:
        pipe()
    err = capfd.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("warning: the decode is estimated"))
    assert "on the device's 1.0 MiB" in line and "set vae.tiling=true" in line
    assert err.index("warning: the decode is estimated") < err.index("sampling")
    monkeypatch.undo()
    with vidax.load(DEMO, *FAST, "output.path=null", quiet=False) as pipe:
        pipe()
    assert "warning: the decode" not in capfd.readouterr().err


@pytest.mark.parametrize("device", ["tpu-v5e", "h200"])
def test_a_decode_holds_what_the_chip_measured_beyond_its_frames(device, capfd):
    """On the v5e a decode held ~3 GiB of host memory beyond its frames while its programs compiled (Wan2.2-A14B:
    16.8 GiB said, 19.65 held; LTX-2 19B: 18.1 said, 21.2 held): the dry run of a device where that was measured
    counts it in the decode phase, and a device where it was not adds nothing."""
    assert cli.main(["run", DEMO, "--dry-run", "--device", device]) == 0
    out = capfd.readouterr().out.splitlines()
    rows = [x for x in out if x.strip().startswith("decode extra ")]
    host = next(x for x in out if x.strip().startswith("host memory"))
    gib = throughput.named(device).decode_host_gib
    if gib is None:
        assert rows == [] and "compilation cache" not in host
    else:
        assert len(rows) == 1 and f"host {gib:.1f} GiB [decode]" in rows[0], rows
        # a run that finds the decode's programs compiled held that much less (LTX-2 19B: 17.97 GiB against 21.1)
        cold, warm = (float(x) for x in re.findall(r"= ~([\d.]+) GiB.*; ~([\d.]+) GiB with the decode's", host)[0])
        assert abs(cold - warm - gib) < 0.11, host


@pytest.mark.parametrize("index, none", [
    ({"_class_name": "X", "transformer": ["diffusers", "T"], "text_tokenizer": ["transformers", "Tok"],
      "vae": ["diffusers", "V"], "safety_checker": [None, None]}, True),  # Cosmos3's layout: the DiT embeds ids
    ({"transformer": ["diffusers", "T"], "text_encoder": ["transformers", "UMT5EncoderModel"]}, False),
    ({"transformer": ["diffusers", "T"], "image_encoder": ["transformers", "CLIPVisionModel"]}, False),
    ({}, False),  # no index (an original release, single files): not known, so not "none"
])
def test_a_checkpoint_without_an_encoder_tower_places_none(index, none):
    from types import SimpleNamespace

    from vidax_core.placement import memory_plan as mp

    ckpt = SimpleNamespace(model_index=index, has=lambda c: False)
    assert mp.lists_no_encoder(ckpt) is none
    cfg = SimpleNamespace(runtime=SimpleNamespace(encode_on="auto"), offload=SimpleNamespace(enabled=False),
                          model=SimpleNamespace(dtype=None))
    if none:
        assert mp.encoder_placement(cfg, ckpt, 0).where == "none"
