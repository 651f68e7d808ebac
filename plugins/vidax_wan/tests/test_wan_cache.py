"""Step caching on tiny Wan2.1 with classifier-free guidance, against diffusers' own cached runs.

diffusers runs ``pipe.transformer.enable_cache(FirstBlockCacheConfig(...))`` / ``MagCacheConfig(...)`` with its
Wan pipeline (a cache context per guidance branch); its hooks are wrapped to record which branch skipped which
step. vidax runs the same checkpoint, noise and cache config in one loaded pipe. The first-block threshold sits
between the two branches' statistics at step 3, so the branches skip different steps (each keeps its own state,
as diffusers' contexts do) and the test can tell per-branch state from a shared one. Latents match within 1e-4
relative, the skip lists are equal, and each cached run is far (> 10x the tolerance) from the uncached one.
MagCache's calibration mode gives diffusers' ratios and a file a later run's ``mag_ratios`` can name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidax_core.testing.parity import rel_l2
from vidax_core.testing.reference import save_pipeline
from vidax_core.testing.step_cache import Recorder
from vidax_core.testing.tiny.wan import build_tiny_wan_pipeline

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static"
STEPS = 8
FBC_THRESHOLD = 0.0428  # the branches' head-residual changes at step 3 are 0.0432 (cond) and 0.0424 (uncond)
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 0.97]
TOL = 1e-4
TWO_EXPERT_FBC = 0.05
# The published Wan2.1 polynomials are fitted to real checkpoints; on a random tiny model their inputs fall far
# outside the fitted range, so the rule is exercised with a quadratic of its own (a run key like any other).
TEA = {"coefficients": [1.0, 0.5, 0.0], "threshold": 1.5}


def teacache_reference(transformer, timesteps, coefficients, threshold, use_ret_steps):
    """TeaCache4Wan2.1's ``teacache_forward`` decision, re-implemented in float64 from the diffusers model's
    weights: per call (cond even, uncond odd) the rescaled relative L1 change of ``e0`` (retention steps) or
    ``e`` accumulates until it reaches the threshold. Returns {branch: skipped steps}."""
    ce = transformer.condition_embedder
    def lin(layer, x):
        return x @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()

    def silu(x):
        return x / (1 + np.exp(-x))

    half = transformer.config.freq_dim // 2

    def modulated(t):
        angles = t * np.exp(-np.log(10000.0) * np.arange(half) / half)
        e = lin(ce.time_embedder.linear_2, silu(lin(ce.time_embedder.linear_1,
                                                    np.concatenate([np.cos(angles), np.sin(angles)]))))
        return lin(ce.time_proj, silu(e)) if use_ret_steps else e

    n = len(timesteps)
    ret, cutoff = (5 * 2, n * 2) if use_ret_steps else (1 * 2, n * 2 - 2)
    poly = np.poly1d(coefficients)
    acc, prev, skipped, cnt = [0.0, 0.0], [None, None], {"cond": [], "uncond": []}, 0
    for k, t in enumerate(timesteps):
        for b, name in enumerate(("cond", "uncond")):
            m = modulated(float(t))
            if cnt < ret or cnt >= cutoff:
                acc[b] = 0.0
            else:
                acc[b] += poly(np.abs(m - prev[b]).mean() / np.abs(prev[b]).mean())
                if acc[b] < threshold:
                    skipped[name].append(k)
                else:
                    acc[b] = 0.0
            prev[b] = m
            cnt += 1
    return skipped


def count_host_reads(monkeypatch) -> dict[str, int]:
    """Counts every read of a device array's value on the host (``np.asarray``, ``np.array``, ``bool``,
    ``float``, ``.item()``, ``jax.device_get`` of a ``jax.Array``; jax's transfer guards do not fire on the CPU
    backend, where device memory is host memory), by where it happens: ``plan`` (making the pass's cache plan,
    before the first step), ``step`` (while a denoising step runs) and ``report`` (the cache's record, after the
    last step). A cache deciding on the host would read once per step; :func:`_per_video` takes and resets them."""
    from jax._src import array as jax_array

    from vidax_core.cache import run as cache_run
    from vidax_core.runner import denoiser

    reads = {"plan": 0, "step": 0, "report": 0}
    where: list[str] = []
    value = jax_array.ArrayImpl._value

    def counted(arr):
        if where:
            reads[where[-1]] += 1
        return value.fget(arr)

    def inside(name, fn):
        def run(*a, **kw):
            where.append(name)
            try:
                return fn(*a, **kw)
            finally:
                where.pop()

        return run

    monkeypatch.setattr(jax_array.ArrayImpl, "_value", property(counted))
    def numpy_read(real):
        def read(a, *args, **kw):
            if where and isinstance(a, jax_array.ArrayImpl):
                reads[where[-1]] += 1
            return real(a, *args, **kw)

        return read

    for name in ("asarray", "array"):  # on CPU these read a jax.Array through the buffer protocol, not _value
        monkeypatch.setattr(np, name, numpy_read(getattr(np, name)))
    monkeypatch.setattr(cache_run, "pass_plan", inside("plan", cache_run.pass_plan))
    monkeypatch.setattr(cache_run, "pass_report", inside("report", cache_run.pass_report))
    make = denoiser.Expert.make_step

    class Counted:  # the step, its calls counted (an offloaded step's attributes still reachable)
        def __init__(self, step):
            self.__dict__["_step"] = step
            self.__dict__["_call"] = inside("step", step)

        def __call__(self, *a):
            return self._call(*a)

        def __getattr__(self, name):
            return getattr(self._step, name)

    def guarded(expert, *args, **kwargs):
        new = make(expert, *args, **kwargs)
        expert.step = Counted(expert.step)
        return new

    monkeypatch.setattr(denoiser.Expert, "make_step", guarded)
    return reads


def _per_video(reads: dict[str, int]) -> tuple[int, int, int]:
    out = (reads["plan"], reads["step"], reads["report"])
    reads.update(plan=0, step=0, report=0)
    return out


@pytest.mark.long
def test_wan_cache_matches_diffusers(tmp_path, monkeypatch):
    import torch
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    import vidax

    torch.manual_seed(0)
    pipe = build_tiny_wan_pipeline(seed=3, scheduler="unipc")
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    noise = np.random.default_rng(0).standard_normal((1, 4, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    rec = Recorder(monkeypatch)

    def reference(config):
        out = rec.run([pipe.transformer], config, lambda: pipe(
            prompt=PROMPT, negative_prompt=NEGATIVE, height=64, width=64, num_frames=9, guidance_scale=5.0,
            num_inference_steps=STEPS, max_sequence_length=16, latents=torch.from_numpy(noise),
            output_type="latent").frames)
        return np.asarray(out, np.float32), {n: rec.skipped(n) for n in ("cond", "uncond")}

    plain, _ = reference(None)
    fbc_ref, fbc_skips = reference(FirstBlockCacheConfig(threshold=FBC_THRESHOLD))
    mag_ref, mag_skips = reference(MagCacheConfig(threshold=0.06, max_skip_steps=3, retention_ratio=0.2,
                                                  num_inference_steps=STEPS, mag_ratios=MAG_RATIOS))
    _, _ = reference(MagCacheConfig(num_inference_steps=STEPS, calibrate=True))
    assert fbc_skips["cond"] != fbc_skips["uncond"] and all(fbc_skips.values())  # the case is not degenerate
    assert all(mag_skips.values())

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}", "sampling.scheduler=null",
            f"sampling.num_steps={STEPS}", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9",
            "sampling.guidance_scale=5.0", "sampling.max_sequence_length=16",
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    fbc_cfg = {"method": "first_block", "threshold": FBC_THRESHOLD}
    mag_cfg = {"method": "mag", "mag_ratios": MAG_RATIOS}
    with monkeypatch.context() as m:
        reads = count_host_reads(m)
        with vidax.load("wan2.1-t2v-1.3b", *args) as p:
            # (plan, step, report) host reads of each video: no step reads a device value back, and the cache's
            # record comes back in one transfer after the last step (TeaCache's signal in one before the first)
            cases = {"first_block": (p(cache=fbc_cfg), fbc_ref, fbc_skips)}
            assert _per_video(reads) == (0, 0, 1)
            cases["mag"] = (p(cache=mag_cfg), mag_ref, mag_skips)
            assert _per_video(reads) == (0, 0, 1)
            calib = p(cache={"method": "mag", "calibrate": True},
                      output={"metrics": str(tmp_path / "calib.json")})
            assert _per_video(reads) == (0, 0, 2)  # the record and the measured ratios
            tea = p(cache={"method": "teacache", "use_ret_steps": False, **TEA})
            assert _per_video(reads) == (1, 0, 1)
            timesteps = np.asarray(pipe.scheduler.timesteps, np.float64)  # the schedule the reference just ran
            from vidax_core.cache import schedule
            from vidax_core.cache import run as cache_run

            signal = cache_run.teacache_signal(p._model.experts[0], timesteps)
            ret_flags = schedule.teacache_flags(signal(True), TEA["coefficients"], threshold=0.2, use_ret_steps=True)
    # sequence / tensor parallel: the first-block decision over sequence shards (all-reduced) and with
    # head-sharded blocks gives the one-device run
    from vidax_core.testing.runs import run_many

    fbc = f"cache={{method: first_block, threshold: {FBC_THRESHOLD}}}"
    runs = run_many(["model.id=wan2.1-t2v-1.3b", *args[:-1]],
                    {"one": (fbc,), "sp2": (fbc, "parallel.sp=2"), "tp2": (fbc, "parallel.tp=2"),
                     "sp2_offload": (fbc, "parallel.sp=2", "offload.enabled=true", "offload.chunk_size=1")},
                    devices=2)
    for layout in ("sp2", "tp2", "sp2_offload"):
        assert runs[layout]["parallel"][layout[:2]] == 2 and runs[layout]["rel"] < TOL, runs
        assert runs[layout]["cache"]["branches"] == runs["one"]["cache"]["branches"] == \
            cases["first_block"][0].metrics["cache"]["branches"]
    assert runs["sp2_offload"]["offload"]["enabled"], runs["sp2_offload"]["offload"]

    # offload: the same runs with the blocks streamed chunk by chunk; a step every context skips streams none.
    # MagCache knows its schedule on the host; FirstBlockCache reads its decision back once per step.
    from vidax_core.parallel import offload
    from vidax_core.runner import offload_step

    events: list[str] = []  # "step" when a step starts, "put" per chunk sent to the device
    real_put, real_step = offload.BlockPool._put, offload_step.OffloadedStep.__call__
    monkeypatch.setattr(offload.BlockPool, "_put", lambda pool, k: events.append("put") or real_put(pool, k))
    monkeypatch.setattr(offload_step.OffloadedStep, "__call__",
                        lambda step, *a: events.append("step") or real_step(step, *a))
    streamed = {}
    with monkeypatch.context() as m:
        reads = count_host_reads(m)
        with vidax.load("wan2.1-t2v-1.3b", *args, "offload.enabled=true", "offload.chunk_size=1") as p:
            for name, cache in (("mag", mag_cfg), ("first_block", fbc_cfg)):
                events.clear()
                out = p(cache=cache)
                streamed[name] = (out, [c.count("put") for c in " ".join(events).split("step")[1:]], _per_video(reads))
    assert streamed["mag"][2] == (0, 0, 1) and streamed["first_block"][2] == (0, STEPS, 1), streamed
    for name, (out, per_step, _) in streamed.items():
        resident = cases[name][0].metrics["cache"]
        assert rel_l2(out.latents, cases[name][1]) < TOL, name
        assert out.metrics["cache"]["branches"] == resident["branches"], name
        skipped = out.metrics["cache"]["skipped_steps"]
        assert skipped == resident["skipped_steps"] != [], (name, resident)
        assert len(per_step) == STEPS
        assert all(per_step[k] == 0 for k in skipped), (name, per_step)
        assert all(per_step[k] > 0 for k in range(STEPS) if k not in skipped), (name, per_step)

    for name, (out, ref, skips) in cases.items():
        err, moved = rel_l2(out.latents, ref), rel_l2(ref, plain)
        assert err < TOL, (name, err)
        assert moved > 10 * TOL, (name, moved)  # the cache really changed the result
        report = out.metrics["cache"]
        assert report["method"] == name
        for branch in ("cond", "uncond"):
            assert report["branches"][branch]["skipped_steps"] == skips[branch], (name, branch, report)
        both = sorted(set(skips["cond"]) & set(skips["uncond"]))
        assert report["skipped_steps"] == both and report["computed_steps"] == sorted(set(range(STEPS)) - set(both))

    # calibration: nothing skipped, diffusers' per-context ratios, and a file mag_ratios can name
    ratios = calib.metrics["cache"]["mag_ratios"]
    assert calib.metrics["cache"]["skipped_steps"] == []
    for branch in ("cond", "uncond"):
        np.testing.assert_allclose(ratios[branch], rec.ratios[branch], rtol=1e-4, atol=1e-5)
    written = json.loads((tmp_path / "calib.mag_ratios.json").read_text())
    assert written["mag_ratios"] == ratios

    # TeaCache: the precomputed schedule is the float64 reference rule's, in both modes
    want = teacache_reference(pipe.transformer, timesteps, TEA["coefficients"], TEA["threshold"], False)
    assert want["cond"] == want["uncond"] and 0 < len(want["cond"]) < STEPS - 2
    assert tea.metrics["cache"]["skipped_steps"] == want["cond"]
    assert rel_l2(tea.latents, plain) > 10 * TOL
    want_ret = teacache_reference(pipe.transformer, timesteps, TEA["coefficients"], 0.2, True)
    assert [k for k in range(STEPS) if not ret_flags[k]] == want_ret["cond"] != []


@pytest.mark.parametrize("steps", [8, 50])
def test_shipped_wan_ratios_give_magcache4wan_schedule(steps):
    """The shipped MagCache4Wan2.1 table (T2V 1.3B) through vidax's schedule equals diffusers' hook logic run on
    the same per-branch ratios (its state machine driven directly, no model)."""
    import torch
    from diffusers.hooks import mag_cache as mag

    from vidax_core.cache import schedule, tables

    for branch, ratios in tables.MAG_RATIOS["wan2.1-t2v-1.3b"].items():
        config = mag.MagCacheConfig(num_inference_steps=steps, mag_ratios=ratios)
        got = schedule.mag_flags(ratios, steps, threshold=config.threshold, max_skip_steps=config.max_skip_steps,
                                 retention_ratio=config.retention_ratio)
        state = mag.MagCacheState()
        want = []
        hook = mag.MagCacheHeadHook(None, config)
        for k in range(steps):  # the decision part of MagCacheHeadHook.new_forward, step by step
            compute = True
            scale = float(config.mag_ratios[k])
            if k >= int(config.retention_ratio * steps + 0.5):
                state.accumulated_ratio *= scale
                state.accumulated_steps += 1
                state.accumulated_err += abs(1.0 - state.accumulated_ratio)
                if (state.previous_residual is not None and state.accumulated_err <= config.threshold
                        and state.accumulated_steps <= config.max_skip_steps):
                    compute = False
                else:
                    state.accumulated_ratio, state.accumulated_steps, state.accumulated_err = 1.0, 0, 0.0
            if compute:
                state.previous_residual = torch.zeros(1)
            want.append(compute)
        del hook
        assert list(got) == want, branch
        assert not all(want)  # the published ratios do skip steps


def test_wan22_two_experts_keep_a_cache_each(tmp_path, monkeypatch):
    """Wan2.2 A14B: diffusers hooks each transformer separately (``enable_cache`` on both), so each expert has its
    own residuals and counts only its own steps (MagCache's retention and ratios index the expert's calls)."""
    import torch
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    import vidax
    from vidax_core.testing.tiny.wan import build_tiny_wan_variant

    torch.manual_seed(0)
    pipe = build_tiny_wan_variant("wan2.2-t2v-a14b", seed=5)
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    noise = np.random.default_rng(0).standard_normal((1, 4, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    rec = Recorder(monkeypatch)

    def reference(config):
        out = rec.run([pipe.transformer, pipe.transformer_2], config, lambda: pipe(
            prompt=PROMPT, negative_prompt=NEGATIVE, height=64, width=64, num_frames=9, guidance_scale=5.0,
            guidance_scale_2=3.0, num_inference_steps=STEPS, max_sequence_length=16,
            latents=torch.from_numpy(noise), output_type="latent").frames)
        return np.asarray(out, np.float32), {n: rec.skipped(n) for n in ("cond", "uncond")}

    plain, _ = reference(None)
    fbc_ref, fbc_skips = reference(FirstBlockCacheConfig(threshold=TWO_EXPERT_FBC))
    diffs = list(rec.diffs)
    mag_ref, mag_skips = reference(MagCacheConfig(num_inference_steps=STEPS, mag_ratios=MAG_RATIOS))
    assert all(fbc_skips.values()) and all(mag_skips.values()), (fbc_skips, mag_skips, diffs)
    assert all(abs(d - TWO_EXPERT_FBC) > 1e-3 for _, d in diffs if d is not None), diffs

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}", "sampling.scheduler=null",
            f"sampling.num_steps={STEPS}", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9",
            "sampling.guidance_scale=5.0", "sampling.guidance_scale_2=3.0", "sampling.max_sequence_length=16",
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    with vidax.load("wan2.2-t2v-a14b", *args) as p:
        cases = {"first_block": (p(cache={"method": "first_block", "threshold": TWO_EXPERT_FBC}), fbc_ref, fbc_skips),
                 "mag": (p(cache={"method": "mag", "mag_ratios": MAG_RATIOS}), mag_ref, mag_skips)}
    for name, (out, ref, skips) in cases.items():
        assert len(set(out.metrics["expert_per_step"])) == 2
        assert rel_l2(out.latents, ref) < TOL, name
        assert rel_l2(ref, plain) > 10 * TOL, name
        for branch in ("cond", "uncond"):
            assert out.metrics["cache"]["branches"][branch]["skipped_steps"] == skips[branch], (name, branch)
