"""Flow-matching samplers (flow Euler, UniPC flow mode) against diffusers, trajectory by trajectory."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler
from diffusers.schedulers import scheduling_flow_match_euler_discrete as fm_mod

from test_schedulers_util import (
    check,
    denoiser,
    initial_sample,
    noises,
    rel_err,
    run_diffusers,
    run_vidax,
)
from vidax_core.schedulers import (
    FlowEulerSampler,
    SchedulerConfigError,
    UniPCSampler,
    available_samplers,
    get_sampler,
    sampler_from_scheduler_config,
)

# diffusers' single-step shift_terminal stretch divides 0/0 (documented quirk, asserted below)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")

STEPS = [1, 2, 7, 50]
SHIFTS = [1.0, 3.0, 5.0]


def _check_plan(plan, sched, int_timesteps=False):
    assert np.array_equal(plan.sigmas, sched.sigmas.numpy()), (plan.sigmas, sched.sigmas)
    ts = sched.timesteps.numpy()
    if int_timesteps:
        assert ts.dtype == np.int64
    assert np.array_equal(plan.timesteps, ts.astype(np.float32))
    assert plan.timesteps.dtype == np.float32


# ------------------------------------------------------------------------------- flow Euler


@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("n", STEPS)
def test_flow_euler_matches_diffusers(n, shift):
    sched = FlowMatchEulerDiscreteScheduler(shift=shift)
    sched.set_timesteps(n)
    sampler = get_sampler("flow_euler", shift=shift)
    plan = sampler.plan(n)
    _check_plan(plan, sched)
    assert plan.sigmas[-1] == 0 and plan.sigmas.shape == (n + 1,)
    np.testing.assert_array_equal(plan.timesteps, plan.sigmas[:-1] * np.float32(1000))
    x0 = initial_sample()
    check("flow_euler", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


@pytest.mark.parametrize(
    "cfg, plan_kw",
    [
        (dict(use_dynamic_shifting=True), dict(mu=0.8)),
        (dict(use_dynamic_shifting=True, time_shift_type="linear"), dict(mu=1.7)),
        (dict(use_dynamic_shifting=True, shift_terminal=0.1), dict(mu=2.05)),  # LTX-Video
        (dict(shift=3.0, invert_sigmas=True), {}),
        (dict(shift=3.0, use_karras_sigmas=True), {}),
        (dict(shift=3.0, use_exponential_sigmas=True), {}),
    ],
    ids=["dyn-exp", "dyn-linear", "dyn-terminal", "invert", "karras", "exponential"],
)
@pytest.mark.parametrize("n", [1, 7, 50])
def test_flow_euler_variants(n, cfg, plan_kw):
    sched = FlowMatchEulerDiscreteScheduler(**cfg)
    sched.set_timesteps(n, **plan_kw)
    if n == 1 and cfg.get("shift_terminal"):
        # single step: diffusers' terminal stretch is 0/0 -> NaN sigmas; vidax keeps sigma=1
        assert np.isnan(sched.sigmas[0].item())
        sched = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True)
        sched.set_timesteps(n, **plan_kw)
    sampler = FlowEulerSampler(**cfg)
    plan = sampler.plan(n, **plan_kw)
    _check_plan(plan, sched)
    x0 = initial_sample()
    check("flow_euler/variants", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


def test_flow_euler_seq_len_mu():
    s = FlowEulerSampler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15)
    # mu from the linear seq_len rule (Flux / Hunyuan pipelines' calculate_shift)
    mu = 0.5 + (1.15 - 0.5) / (4096 - 256) * (1024 - 256)
    np.testing.assert_array_equal(s.plan(10, seq_len=1024).sigmas, s.plan(10, mu=mu).sigmas)
    with pytest.raises(ValueError, match="mu"):
        s.plan(10)


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_flow_euler_custom_sigmas_and_timesteps(n):
    # Wan / LTX style custom sigmas: linspace(1, 1/n, n)
    sigmas = np.linspace(1.0, 1 / n, n)
    for cfg in (dict(shift=5.0), dict(use_dynamic_shifting=True)):
        kw = dict(mu=1.3) if cfg.get("use_dynamic_shifting") else {}
        sched = FlowMatchEulerDiscreteScheduler(**cfg)
        sched.set_timesteps(sigmas=sigmas, **kw)
        sampler = FlowEulerSampler(**cfg)
        plan = sampler.plan(sigmas=sigmas, **kw)
        _check_plan(plan, sched)
        x0 = initial_sample()
        check("flow_euler/custom_sigmas", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))
    # custom timesteps (sigmas derived from them, timesteps kept as given)
    ts = np.linspace(1000, 1000 / n, n)
    sched = FlowMatchEulerDiscreteScheduler(shift=3.0)
    sched.set_timesteps(timesteps=ts)
    plan = FlowEulerSampler(shift=3.0).plan(timesteps=ts)
    _check_plan(plan, sched)


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_flow_euler_stochastic_matches_diffusers(n):
    sched = FlowMatchEulerDiscreteScheduler(shift=3.0, stochastic_sampling=True)
    sched.set_timesteps(n)
    sampler = FlowEulerSampler(shift=3.0, stochastic_sampling=True)
    assert sampler.needs_noise
    plan = sampler.plan(n)
    x0 = initial_sample()
    nz = noises(n)
    ref = run_diffusers(sched, x0, noise_list=nz, noise_patch=fm_mod)
    check("flow_euler/stochastic", run_vidax(sampler, plan, x0, noise_list=nz), ref)
    with pytest.raises(ValueError, match="noise"):
        sampler.step(plan.arrays(), {}, 0, x0, x0)


# ------------------------------------------------------------------------------- UniPC (flow)


def _unipc_pair(n, shift, order=2, solver_type="bh2", **extra):
    dextra = dict(extra)
    vextra = dict(extra)
    if "disable_corrector" in extra:
        vextra["disable_corrector"] = tuple(extra["disable_corrector"])
    sched = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=shift,
        solver_order=order, solver_type=solver_type, **dextra,
    )
    sampler = UniPCSampler(flow_shift=shift, solver_order=order, solver_type=solver_type, **vextra)
    return sched, sampler


@pytest.mark.parametrize("solver_type", ["bh2", "bh1"])
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("n", STEPS)
def test_unipc_flow_matches_diffusers(n, shift, order, solver_type):
    sched, sampler = _unipc_pair(n, shift, order, solver_type)
    sched.set_timesteps(n)
    plan = sampler.plan(n)
    _check_plan(plan, sched, int_timesteps=True)
    x0 = initial_sample()
    ours = run_vidax(sampler, plan, x0)
    ref = run_diffusers(sched, x0)
    if solver_type == "bh1":
        # diffusers' bh1 final step onto sigma=0 computes alpha_t * B_h * 0 with B_h = -inf -> NaN.
        # vidax takes the limit: a first-order step onto sigma=0 returns the x0 prediction.
        assert np.isnan(ref[-1]).all() and np.isnan(ref.f64[-1]).all()
        t_last = float(sched.timesteps[-1])
        from test_schedulers_util import denoiser

        for traj, dt in ((ref, np.float32), (ref.f64, np.float64)):
            prev = x0.astype(dt) if n == 1 else traj[-2]
            traj[-1] = prev - sched.sigmas[-2].numpy().astype(dt) * denoiser(prev, t_last, dt)
    assert np.isfinite(ours[-1]).all()
    check(f"unipc-flow/order{order}/{solver_type}", ours, ref)


def test_unipc_order_ramp_and_lower_order_final():
    s = UniPCSampler(solver_order=3)
    np.testing.assert_array_equal(s.orders(7), [1, 2, 3, 3, 3, 2, 1])
    np.testing.assert_array_equal(s.orders(2), [1, 1])
    np.testing.assert_array_equal(UniPCSampler(solver_order=3, lower_order_final=False).orders(5), [1, 2, 3, 3, 3])
    # the last step onto sigma 0 is always first order (diffusers gives NaN otherwise)
    assert UniPCSampler(solver_order=3, lower_order_final=False).plan(5).extras["orders"][-1] == 1


@pytest.mark.parametrize(
    "extra",
    [
        dict(disable_corrector=[0, 3, 4]),
        dict(final_sigmas_type="sigma_min"),
        dict(use_dynamic_shifting=True),
        dict(shift_terminal=0.05),
        dict(lower_order_final=False),
    ],
    ids=["disable_corrector", "sigma_min", "dynamic", "shift_terminal", "no_lower_order_final"],
)
@pytest.mark.parametrize("order", [2, 3])
def test_unipc_flow_options(extra, order):
    n = 9
    sched, sampler = _unipc_pair(n, 5.0, order, "bh2", **extra)
    kw = dict(mu=1.1) if extra.get("use_dynamic_shifting") else {}
    sched.set_timesteps(n, **kw)
    plan = sampler.plan(n, **kw)
    _check_plan(plan, sched, int_timesteps=True)
    x0 = initial_sample()
    ours = run_vidax(sampler, plan, x0)
    if extra.get("lower_order_final") is False:
        # diffusers' order>1 step onto sigma=0 has rk=0: NaN (order 2) or a singular solve (order 3);
        # vidax steps first order there.
        assert np.isfinite(ours[-1]).all()
        ours, ref = ours[:-1], run_diffusers(sched, x0, max_steps=n - 1)
    else:
        ref = run_diffusers(sched, x0)
    check("unipc-flow/options", ours, ref)


def test_unipc_use_corrector_false_equals_all_disabled():
    n = 12
    sched, _ = _unipc_pair(n, 3.0, 2, "bh2", disable_corrector=list(range(n)))
    sched.set_timesteps(n)
    sampler = UniPCSampler(flow_shift=3.0, use_corrector=False)
    plan = sampler.plan(n)
    assert not plan.extras["c_on"].any()
    x0 = initial_sample()
    check("unipc-flow/options", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


def test_unipc_custom_flow_sigmas():
    sig = np.linspace(1.0, 0.02, 10)
    sched, sampler = _unipc_pair(10, 3.0)
    sched.set_timesteps(sigmas=sig)
    plan = sampler.plan(sigmas=sig)
    _check_plan(plan, sched, int_timesteps=True)


# ------------------------------------------------------------------------------- config mapping

WAN_SCHEDULER_CONFIG = {
    "_class_name": "UniPCMultistepScheduler",
    "_diffusers_version": "0.33.0.dev0",
    "beta_end": 0.02,
    "beta_schedule": "linear",
    "beta_start": 0.0001,
    "disable_corrector": [],
    "dynamic_thresholding_ratio": 0.995,
    "final_sigmas_type": "zero",
    "flow_shift": 3.0,
    "lower_order_final": True,
    "num_train_timesteps": 1000,
    "predict_x0": True,
    "prediction_type": "flow_prediction",
    "rescale_betas_zero_snr": False,
    "sample_max_value": 1.0,
    "solver_order": 2,
    "solver_p": None,
    "solver_type": "bh2",
    "steps_offset": 0,
    "thresholding": False,
    "timestep_spacing": "linspace",
    "trained_betas": None,
    "use_beta_sigmas": False,
    "use_exponential_sigmas": False,
    "use_flow_sigmas": True,
    "use_karras_sigmas": False,
}


@pytest.mark.parametrize("flow_shift", [3.0, 5.0])
def test_wan_scheduler_config(flow_shift):
    cfg = dict(WAN_SCHEDULER_CONFIG, flow_shift=flow_shift)
    sampler = sampler_from_scheduler_config(cfg)
    assert isinstance(sampler, UniPCSampler)
    assert sampler.flow_shift == flow_shift and sampler.solver_order == 2 and sampler.solver_type == "bh2"
    assert sampler.prediction_type == "flow_prediction" and sampler.use_flow_sigmas
    sched = UniPCMultistepScheduler.from_config(cfg)
    sched.set_timesteps(50)
    plan = sampler.plan(50)
    _check_plan(plan, sched, int_timesteps=True)
    # vidax's defaults are Wan's
    assert UniPCSampler() == sampler_from_scheduler_config(WAN_SCHEDULER_CONFIG)
    assert sampler_from_scheduler_config(cfg, flow_shift=7.0).flow_shift == 7.0


def test_flow_match_scheduler_config():
    cfg = {"_class_name": "FlowMatchEulerDiscreteScheduler", "_diffusers_version": "0.32.0", "shift": 7.0,
           "num_train_timesteps": 1000, "use_dynamic_shifting": False, "base_shift": 0.5, "max_shift": 1.15,
           "base_image_seq_len": 256, "max_image_seq_len": 4096, "invert_sigmas": False, "shift_terminal": None,
           "use_karras_sigmas": False, "use_exponential_sigmas": False, "use_beta_sigmas": False,
           "time_shift_type": "exponential", "stochastic_sampling": False}
    s = sampler_from_scheduler_config(cfg)
    assert s == FlowEulerSampler(shift=7.0)
    sched = FlowMatchEulerDiscreteScheduler.from_config(cfg)
    sched.set_timesteps(30)
    _check_plan(s.plan(30), sched)


def test_config_errors_are_one_line():
    with pytest.raises(SchedulerConfigError, match="supported: .*UniPCMultistepScheduler") as e:
        sampler_from_scheduler_config({"_class_name": "LMSDiscreteScheduler"})
    assert "\n" not in str(e.value)
    with pytest.raises(SchedulerConfigError, match="thresholding") as e:
        sampler_from_scheduler_config(dict(WAN_SCHEDULER_CONFIG, thresholding=True))
    assert "\n" not in str(e.value)
    with pytest.raises(SchedulerConfigError, match="frobnicate"):
        sampler_from_scheduler_config(dict(WAN_SCHEDULER_CONFIG, frobnicate=2.0))
    # cosmetic / off-valued unknown fields are ignored
    sampler_from_scheduler_config(dict(WAN_SCHEDULER_CONFIG, _name_or_path="x", some_new_flag=False))
    with pytest.raises(ValueError, match="supported samplers: .*flow_euler.*unipc") as e:
        get_sampler("nope")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="supported options: .*flow_shift") as e:
        get_sampler("unipc", flowshift=3.0)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="solver_order"):
        get_sampler("unipc", solver_order=4)
    assert {"flow_euler", "unipc"} <= set(available_samplers())


def test_unipc_fp32_accuracy_vs_float64():
    """vidax's fp32 trajectory is as close to diffusers-in-float64 as diffusers' own fp32 one."""
    n = 50
    sched, sampler = _unipc_pair(n, 1.0, 2, "bh1")
    sched.set_timesteps(n)
    x0 = initial_sample()
    ours = run_vidax(sampler, sampler.plan(n), x0)
    ref32 = run_diffusers(sched, x0)
    sched.set_timesteps(n)
    sched.sigmas = sched.sigmas.double()
    x = torch.from_numpy(x0).double()
    ref64 = []
    for t in sched.timesteps:
        mo = torch.from_numpy(denoiser(x.numpy(), float(t))).double()
        x = sched.step(mo, t, x).prev_sample
        ref64.append(x.numpy())
    ours_err = max(rel_err(o, r) for o, r in zip(ours[:-1], ref64[:-1]))
    diff_err = max(rel_err(o, r) for o, r in zip(ref32[:-1], ref64[:-1]))
    assert ours_err <= 1.5 * diff_err + 1e-7, (ours_err, diff_err)


@pytest.mark.parametrize("sampler", [UniPCSampler(), FlowEulerSampler(shift=5.0)], ids=["unipc", "flow_euler"])
def test_fifty_step_loop_compiles_once(sampler):
    import jax
    import jax.numpy as jnp

    traces = []

    @jax.jit
    def step(pa, state, i, mo, x):
        traces.append(1)
        return sampler.step(pa, state, i, mo, x)

    plan = sampler.plan(50)
    pa = plan.arrays()
    x = jnp.asarray(initial_sample())
    state = sampler.init_state(plan, x)
    for i in range(50):
        x, state = step(pa, state, jnp.int32(i), jnp.tanh(x), x)
    x.block_until_ready()
    assert len(traces) == 1
    # options that only shape the plan share the compiled step
    assert UniPCSampler(flow_shift=5.0, solver_type="bh1").step_key() == UniPCSampler().step_key()
    assert UniPCSampler(solver_order=3).step_key() != UniPCSampler().step_key()


@pytest.mark.parametrize("bug", ["sign-flip", "sigma-1e-5"])
def test_a_wrong_flow_sampler_fails(bug):
    """The derived tolerance passes the right flow Euler trajectory and rejects a wrong one: the model output's sign
    flipped, or one step's sigma off by 1e-5 relative."""
    from dataclasses import replace

    n, shift = 7, 3.0
    sched = FlowMatchEulerDiscreteScheduler(shift=shift)
    sched.set_timesteps(n)
    sampler = get_sampler("flow_euler", shift=shift)
    plan = sampler.plan(n)
    x0 = initial_sample()
    ref = run_diffusers(sched, x0)
    check("flow_euler/right", run_vidax(sampler, plan, x0), ref)
    model = denoiser
    if bug == "sign-flip":
        model = lambda x, t: -denoiser(x, t)  # noqa: E731
    else:
        sigmas = plan.sigmas.copy()
        sigmas[n // 2] *= np.float32(1 + 1e-5)
        plan = replace(plan, sigmas=sigmas)
    with pytest.raises(AssertionError, match="tolerance"):
        check("flow_euler/deliberately-wrong", run_vidax(sampler, plan, x0, model=model), ref)


@pytest.mark.parametrize("timesteps, strength", [([1000.0, 909.0, 725.0, 421.0, 0.0], 0.999),
                                                 ([1000.0, 993.0, 987.0, 981.0, 975.0, 909.0, 725.0, 0.03], 0.5),
                                                 (None, 0.4)])
def test_plan_tail_is_diffusers_get_timesteps(timesteps, strength):
    """``denoise_strength`` as LTXConditionPipeline.get_timesteps: the last int(N * s) steps of the plan, their
    sigmas (with the terminal 0) and model timesteps."""
    ref = FlowMatchEulerDiscreteScheduler()
    n = len(timesteps) if timesteps else 10
    ref.set_timesteps(n, timesteps=timesteps)
    start = n - min(int(n * strength), n)
    plan = FlowEulerSampler().plan(n, timesteps=timesteps).tail(start)
    assert plan.num_steps == n - start
    np.testing.assert_array_equal(plan.sigmas, ref.sigmas.numpy()[start:])
    np.testing.assert_array_equal(plan.timesteps, ref.timesteps.numpy()[start:])


def test_plan_tail_refuses_multistep_tables():
    plan = UniPCSampler(use_flow_sigmas=True, prediction_type="flow_prediction").plan(6)
    with pytest.raises(ValueError, match="cannot start part way"):
        plan.tail(2)
    with pytest.raises(ValueError, match="cannot start"):
        FlowEulerSampler().plan(4).tail(4)
