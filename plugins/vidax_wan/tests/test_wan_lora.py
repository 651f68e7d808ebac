"""Wan LoRA adapters fused at load, against diffusers' ``load_lora_weights`` + ``set_adapters`` + ``fuse_lora``.

Each case writes tiny adapters with the real key names of one layout (diffusers/peft, the original ComfyUI /
lightx2v names with ``lora_down``/``lora_up`` or ``lora_A``/``lora_B``, ``.alpha``, ``.diff_b`` and ``.diff``,
kohya/musubi ``lora_unet_``), fuses them into a tiny transformer's tensors as a vidax load does, and compares every
tensor with the weights diffusers fuses; and shows that leaving the adapter out, the wrong scale or a transposed
delta miss by far more than the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.lora import diffusers_fused, max_diff, save_adapter, vidax_fused
from vidax_core.testing.reference import randomize_
from vidax_core.testing.tiny.wan import TINY_DIT

from vidax_wan.original_format import dit_key
from vidax_wan.plugin import WanPlugin

plugin = WanPlugin()

TOL = 1e-5
RANK = 4
DIM = TINY_DIT["num_attention_heads"] * TINY_DIT["attention_head_dim"]
I2V = dict(image_dim=16, added_kv_proj_dim=DIM)


def key_map(layout):
    return plugin.lora_key_map(None, layout)


def block_modules(i2v: bool = False) -> dict[str, tuple[int, int]]:
    """Original module name -> (out, in) of every linear of the tiny DiT's blocks."""
    out = {}
    for b in range(TINY_DIT["num_layers"]):
        for attn in ("self_attn", "cross_attn"):
            for p in ("q", "k", "v", "o"):
                out[f"blocks.{b}.{attn}.{p}"] = (DIM, DIM)  # text is projected to DIM first
        if i2v:
            out[f"blocks.{b}.cross_attn.k_img"] = (DIM, DIM)
            out[f"blocks.{b}.cross_attn.v_img"] = (DIM, DIM)
        out[f"blocks.{b}.ffn.0"] = (TINY_DIT["ffn_dim"], DIM)
        out[f"blocks.{b}.ffn.2"] = (DIM, TINY_DIT["ffn_dim"])
    return out


EXTRA = {"time_projection.1": (6 * DIM, DIM), "text_embedding.0": (DIM, TINY_DIT["text_dim"]),
         "text_embedding.2": (DIM, DIM), "time_embedding.0": (DIM, TINY_DIT["freq_dim"]),
         "time_embedding.2": (DIM, DIM)}


def factors(modules, seed, rank=RANK):
    rng = np.random.default_rng(seed)
    return {m: (rng.normal(0, 0.3, (rank, i)).astype(np.float32), rng.normal(0, 0.3, (o, rank)).astype(np.float32))
            for m, (o, i) in modules.items()}


def original_adapter(path, seed, *, names=("lora_down", "lora_up"), alpha=8.0, i2v=False, extras=True,
                     diff_b=True, head_diff=True):
    """A ComfyUI / lightx2v layout adapter: ``diffusion_model.<original name>.lora_down.weight``..."""
    mods = {**block_modules(i2v), **(EXTRA if extras else {})}
    t = {}
    rng = np.random.default_rng(seed + 100)
    for m, (down, up) in factors(mods, seed).items():
        t[f"diffusion_model.{m}.{names[0]}.weight"] = down
        t[f"diffusion_model.{m}.{names[1]}.weight"] = up
        if alpha is not None and m.startswith("blocks."):  # diffusers reads no alpha of the embedding layers
            t[f"diffusion_model.{m}.alpha"] = np.float32(alpha)
        if diff_b:
            t[f"diffusion_model.{m}.diff_b"] = rng.normal(0, 0.1, up.shape[0]).astype(np.float32)
    if head_diff:  # lightx2v's Wan2.2 distill LoRAs: a full delta (and bias delta) of the head
        out = TINY_DIT["out_channels"] * int(np.prod(TINY_DIT["patch_size"]))
        t["diffusion_model.head.head.diff"] = rng.normal(0, 0.1, (out, DIM)).astype(np.float32)
        t["diffusion_model.head.head.diff_b"] = rng.normal(0, 0.1, out).astype(np.float32)
    return save_adapter(path, t)


def kohya_adapter(path, seed, alpha=2.0):
    """musubi-tuner's layout: ``lora_unet_blocks_0_self_attn_q.lora_down.weight`` and ``.alpha``."""
    t = {}
    for m, (down, up) in factors(block_modules(), seed).items():
        k = "lora_unet_" + m.replace(".", "_")
        t[f"{k}.lora_down.weight"], t[f"{k}.lora_up.weight"], t[f"{k}.alpha"] = down, up, np.float32(alpha)
    return save_adapter(path, t)


def diffusers_adapter(path, seed, *, peft=None, bias=False, only=None, i2v=False):
    """diffusers' own layout: ``transformer.blocks.0.attn1.to_q.lora_A.weight`` (+ the peft config metadata)."""
    t = {}
    rng = np.random.default_rng(seed + 200)
    for m, (down, up) in factors(block_modules(i2v), seed).items():
        if only and not any(s in m for s in only):
            continue
        k = "transformer." + dit_key(m)
        t[f"{k}.lora_A.weight"], t[f"{k}.lora_B.weight"] = down, up
        if bias:
            t[f"{k}.lora_B.bias"] = rng.normal(0, 0.1, up.shape[0]).astype(np.float32)
    cfg = None
    if peft is not None:
        cfg = {"r": RANK, "lora_alpha": peft, "lora_bias": bias,
               "target_modules": sorted({k[len("transformer."):].rsplit(".lora_", 1)[0] for k in t})}
    return save_adapter(path, t, cfg)


def pipeline(**dit):
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, WanImageToVideoPipeline, WanPipeline, WanTransformer3DModel

    torch.manual_seed(0)
    tr = WanTransformer3DModel(**{**TINY_DIT, **dit}).eval()
    randomize_(tr, 1, 0.1)
    cls = WanImageToVideoPipeline if dit.get("image_dim") else WanPipeline
    parts = dict(tokenizer=None, text_encoder=None, vae=None,
                 scheduler=FlowMatchEulerDiscreteScheduler(), transformer=tr)
    if cls is WanImageToVideoPipeline:
        parts.update(image_encoder=None, image_processor=None)
    return cls(**parts)


def state(pipe, component="transformer"):
    return {k: v.detach().float().numpy().copy() for k, v in getattr(pipe, component).state_dict().items()}


def check_parity(base, ours, ref, wrong=()):
    """ours == ref within TOL; the base (adapter ignored) and every ``wrong`` fusion miss by > 100 x TOL."""
    assert set(ours) == set(ref)
    err = max_diff(ref, ours)
    assert err < TOL, err
    assert max_diff(ref, base) > 100 * TOL
    for w in wrong:
        assert max_diff(ref, w) > 100 * TOL
    return err


def transposed(base, adapter_path, scale, modules):
    """The fusion with up and down swapped where the shapes allow it (square modules): ``(up @ down).T``."""
    out = dict(base)
    fused = vidax_fused(base, [(adapter_path, scale)], key_map)
    for k in modules:
        out[k] = base[k] + (fused[k] - base[k]).T
    return out


CASES = {
    # case -> (adapter writer, scale, diffusers load kwargs)
    "diffusers": (lambda p: diffusers_adapter(p, 1), 0.8),
    "diffusers-peft-alpha-bias": (lambda p: diffusers_adapter(p, 2, peft=2 * RANK, bias=True), 1.0),
    "original-down-up-alpha": (lambda p: original_adapter(p, 3), 0.7),
    "original-A-B-no-alpha": (lambda p: original_adapter(p, 4, names=("lora_A", "lora_B"), alpha=None), 1.2),
    "kohya-musubi": (lambda p: kohya_adapter(p, 5), 1.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_layout_fuses_as_diffusers(tmp_path, case):
    write, scale = CASES[case]
    path = write(tmp_path / f"{case}.safetensors")
    pipe = pipeline()
    base = state(pipe)
    ours = vidax_fused(base, [(path, scale)], key_map)
    ref = diffusers_fused(pipe, [(path, scale, {})])["transformer"]
    wrong_scale = vidax_fused(base, [(path, scale * 0.5)], key_map)
    check_parity(base, ours, ref, [wrong_scale, transposed(base, path, scale, ["blocks.0.attn1.to_q.weight"])])


def test_two_adapters_with_different_scales_on_overlapping_layers(tmp_path):
    a = original_adapter(tmp_path / "a.safetensors", 6)
    b = diffusers_adapter(tmp_path / "b.safetensors", 7, only=("self_attn", "ffn"))  # overlaps a's layers
    pipe = pipeline()
    base = state(pipe)
    ours = vidax_fused(base, [(a, 0.6), (b, 1.4)], key_map)
    ref = diffusers_fused(pipe, [(a, 0.6, {}), (b, 1.4, {})])["transformer"]
    swapped = vidax_fused(base, [(a, 1.4), (b, 0.6)], key_map)
    only_a = vidax_fused(base, [(a, 0.6)], key_map)
    check_parity(base, ours, ref, [swapped, only_a])


@pytest.mark.parametrize("kind", ["t2v-lora", "i2v-lora"])
def test_i2v_model(tmp_path, kind):
    """A T2V adapter on an I2V model (diffusers expands it with zero image-projection deltas) and an I2V adapter
    with ``k_img``/``v_img``."""
    if kind == "t2v-lora":
        path = original_adapter(tmp_path / "t2v.safetensors", 8, extras=False)
    else:
        path = original_adapter(tmp_path / "i2v.safetensors", 9, i2v=True, extras=False)
    pipe = pipeline(**I2V)
    base = state(pipe)
    ours = vidax_fused(base, [(path, 0.9)], key_map)
    ref = diffusers_fused(pipe, [(path, 0.9, {})])["transformer"]
    check_parity(base, ours, ref)
    touched = ours["blocks.0.attn2.add_k_proj.weight"] - base["blocks.0.attn2.add_k_proj.weight"]
    assert (np.abs(touched).max() > 0.01) == (kind == "i2v-lora")


def test_full_deltas_diffusers_drops_are_applied(tmp_path):
    """A ``.diff`` on a block's linear and a ``.diff_m`` of its modulation table (diffusers drops both with a log
    line) are added whole: W + scale * diff."""
    rng = np.random.default_rng(3)
    diff = rng.normal(0, 0.1, (DIM, DIM)).astype(np.float32)
    mod = rng.normal(0, 0.1, (1, 6, DIM)).astype(np.float32)
    path = save_adapter(tmp_path / "d.safetensors", {"diffusion_model.blocks.1.self_attn.o.diff": diff,
                                                      "diffusion_model.blocks.0.diff_m": mod})
    base = state(pipeline())
    ours = vidax_fused(base, [(path, 0.5)], key_map)
    want = {"blocks.1.attn1.to_out.0.weight": diff, "blocks.0.scale_shift_table": mod}  # diff_m: the modulation
    for k, d in want.items():
        np.testing.assert_allclose(ours[k], base[k] + 0.5 * d, rtol=0, atol=1e-6)
    assert max_diff({k: v for k, v in ours.items() if k not in want}, base) == 0.0


def test_two_experts_take_one_adapter_each(tmp_path):
    """Wan2.2 A14B: ``expert: high_noise`` fuses into ``transformer``, ``low_noise`` into ``transformer_2`` (as
    diffusers' ``load_into_transformer_2=True``), routed by the run's ``lora:`` entries."""
    import types

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel

    from vidax_core import lora
    from vidax_core.config import check_lora
    from vidax_core.plugins import get_plugins

    torch.manual_seed(0)
    experts = [WanTransformer3DModel(**TINY_DIT).eval() for _ in range(2)]
    for k, tr in enumerate(experts):
        randomize_(tr, 1 + 10 * k, 0.1)
    pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=None, scheduler=FlowMatchEulerDiscreteScheduler(),
                       transformer=experts[0], transformer_2=experts[1], boundary_ratio=0.875)
    high = original_adapter(tmp_path / "high.safetensors", 10)
    low = kohya_adapter(tmp_path / "low.safetensors", 11)
    comps = ("transformer", "transformer_2")
    base = {c: state(pipe, c) for c in comps}
    ckpt = types.SimpleNamespace(read_tensors=lambda c: base[c])
    builds = [types.SimpleNamespace(component=c) for c in comps]
    plugins = get_plugins()
    spec = plugins.registry.get("wan2.2-t2v-a14b")
    run = types.SimpleNamespace(lora=check_lora([{"path": low, "scale": 0.7, "expert": "low_noise"},
                                                  {"path": high, "scale": 1.1, "expert": "high_noise"}]))
    prepared = lora.prepare(run, spec, ckpt, builds, plugins)
    assert [s.component for s in prepared.summaries] == ["transformer_2", "transformer"]
    ours = {c: {k: np.asarray(v, np.float32) for k, v in prepared.fused(c, base[c]).items()} for c in comps}
    ref = diffusers_fused(pipe, [(high, 1.1, {}), (low, 0.7, {"load_into_transformer_2": True})], comps)
    for c in comps:
        check_parity(base[c], ours[c], ref[c])
    routed_wrong = {c: prepared.fused(comps[1 - i], base[c]) for i, c in enumerate(comps)}
    assert max_diff(ref["transformer"], {k: np.asarray(v) for k, v in routed_wrong["transformer"].items()}) > 100 * TOL


def test_cli_run_with_two_adapters_matches_diffusers(tmp_path):
    """``vidax run`` with ``lora:`` (an original-layout adapter and a diffusers one on overlapping layers, two
    scales) gives diffusers' latents after ``load_lora_weights`` + ``set_adapters`` (unfused peft layers) from the
    same noise; diffusers without the adapters, or at another scale, lands far away."""
    import torch

    from vidax_core.testing.cli import overrides, run_e2e
    from vidax_core.testing.parity import rel_l2
    from vidax_core.testing.reference import save_pipeline
    from vidax_core.testing.tiny.wan import build_tiny_wan_pipeline

    a = original_adapter(tmp_path / "a.safetensors", 12)
    b = diffusers_adapter(tmp_path / "b.safetensors", 13, only=("self_attn", "ffn"))
    pipe = build_tiny_wan_pipeline(seed=3, scheduler="euler")
    save_pipeline(pipe, tmp_path / "ckpt")
    size, frames, steps = 32, 5, 3
    noise = np.random.default_rng(0).standard_normal((1, 4, 2, size // 8, size // 8)).astype(np.float32)
    kwargs = dict(prompt="a fox", negative_prompt="blur", height=size, width=size, num_frames=frames,
                  num_inference_steps=steps, guidance_scale=5.0, max_sequence_length=16, output_type="latent")

    def reference():
        return np.asarray(pipe(latents=torch.from_numpy(noise), **kwargs).frames, np.float32)

    plain = reference()
    pipe.load_lora_weights(a, adapter_name="a")
    pipe.load_lora_weights(b, adapter_name="b")
    pipe.set_adapters(["a", "b"], adapter_weights=[0.6, 1.4])
    ref = reference()
    pipe.set_adapters(["a", "b"], adapter_weights=[0.3, 1.4])
    wrong_scale = reference()

    run = run_e2e(tmp_path, "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={tmp_path / 'ckpt'}", "prompt=a fox",
                  "negative_prompt=blur", f"lora=[{{path: {a}, scale: 0.6}}, {{path: {b}, scale: 1.4}}]",
                  *overrides(sampling=dict(num_steps=steps, height=size, width=size, num_frames=frames,
                                           guidance_scale=5.0, max_sequence_length=16, scheduler=None)), noise=noise)
    err = rel_l2(run.latents, ref)
    assert err < 1e-4, err
    assert rel_l2(plain, ref) > 100 * max(err, 1e-6)
    assert rel_l2(wrong_scale, ref) > 100 * max(err, 1e-6)


@pytest.mark.parametrize("alpha", [0, None, 6])
def test_peft_metadata_alpha_as_diffusers(tmp_path, alpha):
    """diffusers builds ``LoraConfig(**metadata)``: ``lora_alpha`` 0 scales the delta by 0, a config without
    ``lora_alpha`` takes peft's default of 8 (factor 8 / rank), and any other alpha gives alpha / rank."""
    t = {}
    for m, (down, up) in factors(block_modules(), 12).items():
        k = "transformer." + dit_key(m)
        t[f"{k}.lora_A.weight"], t[f"{k}.lora_B.weight"] = down, up
    cfg = {"r": RANK, "target_modules": sorted({k[len("transformer."):].rsplit(".lora_", 1)[0] for k in t})}
    if alpha is not None:
        cfg["lora_alpha"] = alpha
    path = save_adapter(tmp_path / "a.safetensors", t, cfg)
    factor_one = save_adapter(tmp_path / "one.safetensors", t, {**cfg, "lora_alpha": RANK})  # the old reading
    pipe = pipeline()
    base = state(pipe)
    ours = vidax_fused(base, [(path, 1.0)], key_map)
    ref = diffusers_fused(pipe, [(path, 1.0, {})])["transformer"]
    assert max_diff(ref, ours) < TOL
    if alpha == 0:
        assert max_diff(ref, base) == 0.0  # diffusers too adds nothing
    else:
        assert max_diff(ref, base) > 100 * TOL
    assert max_diff(ref, vidax_fused(base, [(factor_one, 1.0)], key_map)) > 100 * TOL
