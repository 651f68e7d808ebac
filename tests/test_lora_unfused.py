"""``lora_mode: unfused``: adapters as factor parameters of the step, swappable on a loaded pipe without compiling.

On the tiny Wan checkpoint: a pipe loaded unfused with two adapters (original layout with alpha and bias deltas on
the blocks and the embeddings; diffusers layout on overlapping layers) gives diffusers' latents after
``load_lora_weights`` + ``set_adapters`` and vidax's fused latents; a new scale and a swap to another adapter of
the same rank give diffusers' latents for those, compile nothing and open no checkpoint weight file; the stale
scale misses by far more. The mapping is the family's key table, so it is checked for a second family (LTX-Video)
at the module level: kernel + down @ diag(scale) @ up equals the fused kernel for every adapted layer. What the
mode cannot apply is refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.errors import UserError
from vidax_core.testing.counters import Counters

STEPS, SIZE, FRAMES = 2, 32, 5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny Wan pipeline (diffusers), its saved checkpoint, three adapters and the noise."""
    from vidax_core.testing.reference import save_pipeline
    from vidax_core.testing.tiny.wan import build_tiny_wan_pipeline

    import importlib.util
    import os

    here = os.path.join(os.path.dirname(__file__), "..", "plugins", "vidax_wan", "tests", "test_wan_lora.py")
    spec = importlib.util.spec_from_file_location("wan_lora_writers", here)
    writers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writers)
    d = tmp_path_factory.mktemp("unfused")
    pipe = build_tiny_wan_pipeline(seed=3, scheduler="euler")
    save_pipeline(pipe, d / "ckpt")
    a = writers.original_adapter(d / "a.safetensors", 12, head_diff=False)  # blocks + embeddings, alpha, diff_b
    b = writers.diffusers_adapter(d / "b.safetensors", 13, only=("self_attn", "ffn"))
    c = writers.diffusers_adapter(d / "c.safetensors", 14, only=("self_attn", "ffn"))  # same rank and layers as b
    noise = np.random.default_rng(0).standard_normal((1, 4, 2, SIZE // 8, SIZE // 8)).astype(np.float32)
    np.save(d / "noise.npy", noise)
    return dict(pipe=pipe, dir=d, a=a, b=b, c=c, noise=noise)


def diffusers_latents(t, cases):
    """diffusers' latents per case (``[(adapter, scale)]``): every adapter loaded once, ``set_adapters`` per case."""
    import torch

    pipe = t["pipe"]
    names = {}
    for path in dict.fromkeys(p for adapters in cases.values() for p, _ in adapters):
        names[path] = f"x{len(names)}"
        pipe.load_lora_weights(path, adapter_name=names[path])
    out = {}
    for case, adapters in cases.items():
        pipe.set_adapters([names[p] for p, _ in adapters], adapter_weights=[s for _, s in adapters])
        out[case] = np.asarray(pipe(latents=torch.from_numpy(t["noise"]), prompt="a fox", negative_prompt="blur",
                                    height=SIZE, width=SIZE, num_frames=FRAMES, num_inference_steps=STEPS,
                                    guidance_scale=5.0, max_sequence_length=16, output_type="latent").frames,
                               np.float32)
    pipe.unload_lora_weights()
    return out


def load_args(t, mode, adapters):
    from vidax_core.testing.cli import overrides

    lora = "[" + ", ".join(f"{{path: {p}, scale: {s}}}" for p, s in adapters) + "]"
    return ["wan2.1-t2v-1.3b", f"model.checkpoint={t['dir'] / 'ckpt'}", "prompt=a fox", "negative_prompt=blur",
            f"lora={lora}", f"lora_mode={mode}", "runtime.compilation_cache=false",
            *overrides(sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=5.0,
                                     max_sequence_length=16, scheduler=None,
                                     initial_noise=str(t["dir"] / "noise.npy")))]


def lora_arg(adapters):
    return [{"path": p, "scale": s} for p, s in adapters]


def test_unfused_pipe_matches_fused_and_diffusers_and_swaps_without_compiling(tiny, monkeypatch):
    import vidax
    from vidax_core.testing.parity import rel_l2

    t = tiny
    first = [(t["a"], 0.6), (t["b"], 1.4)]
    rescaled = [(t["a"], 0.6), (t["b"], 0.7)]
    swapped = [(t["a"], 0.6), (t["c"], 1.4)]
    refs = diffusers_latents(t, {"first": first, "rescaled": rescaled, "swapped": swapped})

    with vidax.load(*load_args(t, "fused", first)) as fused:
        with pytest.raises(UserError, match="lora_mode=unfused"):
            fused(lora=lora_arg(rescaled))
        fused_latents = np.asarray(fused().latents, np.float32)

    counters = Counters(monkeypatch)
    with vidax.load(*load_args(t, "unfused", first)) as pipe:
        got = {"first": np.asarray(pipe().latents, np.float32)}
        assert counters.compiles > 0  # the counter sees the first call's compiles
        compiles = {}
        for name, adapters in (("rescaled", rescaled), ("swapped", swapped)):
            counters.reset()
            got[name] = np.asarray(pipe(lora=lora_arg(adapters)).latents, np.float32)
            compiles[name] = (counters.compiles, [o for o in counters.weight_opens if "ckpt" in o])
        counters.reset()
        back = np.asarray(pipe().latents, np.float32)  # a call without lora= runs the load's adapters again
        assert counters.compiles == 0
        with pytest.raises(UserError, match="do not fit the slots"):
            pipe(lora=lora_arg([(t["a"], 1.0), (t["a"], 1.0), (t["b"], 1.0)]))  # twice the rank on a's layers

    assert compiles == {"rescaled": (0, []), "swapped": (0, [])}, compiles
    err_fused = rel_l2(got["first"], fused_latents)
    assert err_fused < 1e-4, err_fused
    errs = {k: rel_l2(got[k], refs[k]) for k in refs}
    assert max(errs.values()) < 1e-4, errs
    print(f"unfused vs fused {err_fused:.2e}, vs diffusers {errs}")
    assert rel_l2(back, got["first"]) < 1e-6
    floor = 100 * max(max(errs.values()), 1e-6)
    assert rel_l2(refs["first"], refs["rescaled"]) > floor  # a stale scale misses by far more
    assert rel_l2(refs["first"], refs["swapped"]) > floor


def test_what_unfused_cannot_apply_is_refused_in_one_line(tmp_path):
    """A ``.diff`` full delta, a family converting with its own code (HunyuanVideo) and block offload, each in
    one line."""
    from vidax_core.lora import unfused
    from vidax_core.lora.check import Target
    from vidax_core.lora.formats import Record
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    wan = plugins.registry.get("wan2.1-t2v-1.3b")
    rules = unfused.rules_for(plugins, wan, "transformer")
    rec = Record("blocks.0.attn1.to_q", {"diff": np.zeros((4, 4), np.float32)}, {"diff": "x.blocks.0.self_attn.q.diff"})
    target = Target("blocks.0.attn1.to_q", "blocks.0.attn1.to_q.weight", None, rec, 1.0)
    with pytest.raises(UserError) as exc:
        unfused.factors([(1.0, [target])], rules, {("blocks", "attn1", "to_q", "kernel"): None}, wan.id)
    assert "\n" not in str(exc.value) and ".diff" in str(exc.value) and "lora_mode: fused" in str(exc.value)
    hunyuan = plugins.registry.get("hunyuanvideo-t2v-13b")  # 1.0 converts with its own code; 1.5 declares rules
    with pytest.raises(UserError, match="its own code"):
        unfused.rules_for(plugins, hunyuan, "transformer")
    import types

    offloaded = types.SimpleNamespace(offload=types.SimpleNamespace(enabled=True))
    with pytest.raises(UserError, match="does not combine with offload"):
        unfused.plan(offloaded, wan, [], None, plugins)


def test_ltx_factors_map_through_its_key_table():
    """LTX-Video (a second family, no family code): for every adapted Linear, the plain kernel plus the unfused
    factors equals the kernel converted from the fused tensors; the wrong scale does not."""
    from vidax_core.io.convert import convert
    from vidax_core.lora import unfused
    from vidax_core.lora.plan import read_adapter
    from vidax_core.lora import fuse
    from vidax_core.nn.state import abstract_model
    from vidax_core.plugins import get_plugins
    from vidax_core.testing.lora import random_lora, save_adapter
    from vidax_core.testing.tiny.ltx import random_ltx_dit

    import tempfile

    plugins = get_plugins()
    spec = plugins.registry.get("ltx-video-2b-0.9.8-distilled")  # LTX-Video (the family also holds LTX-2.x)
    tr = random_ltx_dit(seed=1)
    base = {k: v.detach().numpy().copy() for k, v in tr.state_dict().items()}
    from vidax_ltx.dit import LTXDiT, LTXDiTConfig

    cfg = LTXDiTConfig.from_config(dict(tr.config))
    from flax import nnx

    _, _, abstract = abstract_model(lambda: LTXDiT(cfg, rngs=nnx.Rngs(0)))
    rules = unfused.rules_for(plugins, spec, "transformer")
    with tempfile.TemporaryDirectory() as d:
        path = save_adapter(f"{d}/a.safetensors", random_lora(base, include=r"(transformer_blocks\.\d+\..*|proj_in)"))
        _, targets = read_adapter(path, None, "lora[0]", None, base, spec.id)
        f = unfused.factors([(0.7, targets)], rules, abstract, spec.id)
        slots = unfused.slots_of(f, abstract)
        values = unfused.values(f, slots)
        fused = fuse.fused(base, fuse.terms(targets, 0.7))
        conv = lambda tensors: convert(tensors, rules, abstract, dtype=np.float32)  # noqa: E731
        plain, want = conv(base), conv({k: np.asarray(fused[k]) for k in base})
    assert len(slots) >= 10
    worst, wrong = 0.0, 0.0
    for module in slots:
        k = module + ("kernel",)
        down, up, s = (values[module + (p,)] for p in ("lora_down", "lora_up", "lora_scale"))
        got = plain[k] + np.einsum("...ir,...r,...ro->...io", down, s, up)
        worst = max(worst, float(np.abs(got - want[k]).max()))
        wrong = max(wrong, float(np.abs(plain[k] + 0.5 * (got - plain[k]) - want[k]).max()))
    assert worst < 1e-5, worst
    assert wrong > 100 * max(worst, 1e-7)
