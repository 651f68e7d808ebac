"""Phase-2 samplers against diffusers, trajectory by trajectory: ancestral RF Euler (LTX), UniPC in VP
(epsilon / v) mode, DPM-Solver++ multistep, CogVideoX DDIM / DPM, and their scheduler_config.json mapping."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from diffusers import (
    CogVideoXDDIMScheduler,
    CogVideoXDPMScheduler,
    DPMSolverMultistepScheduler,
    FlowMatchEulerDiscreteScheduler,
    LTXEulerAncestralRFScheduler,
    UniPCMultistepScheduler,
)
from diffusers.schedulers import scheduling_dpm_cogvideox as cogdpm_mod
from diffusers.schedulers import scheduling_ltx_euler_ancestral_rf as ltx_mod

from test_schedulers_util import (
    Trajectory,
    check,
    check_table,
    denoiser,
    float64_scheduler,
    keep_float64,
    initial_sample,
    noises,
    run_diffusers,
    run_vidax,
    vp_alphas_cumprod64,
)
from vidax_core.schedulers import (
    CogVideoXDDIMSampler,
    CogVideoXDPMSampler,
    DPMSolverSampler,
    FlowEulerAncestralSampler,
    FlowEulerSampler,
    SchedulerConfigError,
    UniPCSampler,
    available_samplers,
    get_sampler,
    sampler_from_scheduler_config,
    supported_scheduler_classes,
)
from vidax_core.schedulers.vp import VPSchedule, torch_linspace

STEPS = [1, 2, 7, 50]


def _check_plan(plan, sched, sigmas=True):
    """Timesteps exactly; sigmas exactly (``True``) or to 1 ulp (``"ulp"``: VP sigmas, which diffusers derives
    with torch's CPU float32 sqrt -- not correctly rounded, ~20% of values differ by 1 ulp from IEEE sqrt)."""
    ts = sched.timesteps.numpy()
    assert np.array_equal(plan.timesteps, ts.astype(np.float32)), (plan.timesteps, ts)
    assert plan.timesteps.dtype == np.float32
    if not sigmas:
        return
    ref = sched.sigmas.numpy()
    if sigmas == "ulp":
        ulps = np.abs(plan.sigmas.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
        assert ulps.max() <= 1, (plan.sigmas, ref)
    elif sigmas:
        assert np.array_equal(plan.sigmas, ref), (plan.sigmas, ref)


# ------------------------------------------------------------------------------- schedules


def test_torch_linspace_and_vp_schedules_bit_exact():
    for n in (1, 2, 7, 1000):
        for a, b in ((0.0001, 0.02), (0.00085 ** 0.5, 0.012 ** 0.5)):
            for dt, tdt in ((np.float32, torch.float32), (np.float64, torch.float64)):
                assert np.array_equal(torch_linspace(a, b, n, dt), torch.linspace(a, b, n, dtype=tdt).numpy())
    for bs, lo, hi in (("linear", 1e-4, 0.02), ("scaled_linear", 0.00085, 0.012), ("squaredcos_cap_v2", 1e-4, 0.02)):
        ref = UniPCMultistepScheduler(beta_schedule=bs, beta_start=lo, beta_end=hi).alphas_cumprod.numpy()
        assert np.array_equal(VPSchedule.make(1000, lo, hi, bs).alphas_cumprod, ref)
        ref = CogVideoXDDIMScheduler(beta_schedule=bs, beta_start=lo, beta_end=hi).alphas_cumprod.numpy()
        assert np.array_equal(
            CogVideoXDDIMSampler(beta_schedule=bs, beta_start=lo, beta_end=hi).alphas_cumprod()[0], ref)
        # zero terminal SNR: torch's vectorised sqrt is not correctly rounded, so ulp-level differences remain;
        # bounded by diffusers' own fp32 error against the same rescale in float64
        zcfg = dict(beta_schedule=bs, beta_start=lo, beta_end=hi, rescale_betas_zero_snr=True)
        ref = UniPCMultistepScheduler(**zcfg).alphas_cumprod
        ours = VPSchedule.make(1000, lo, hi, bs, rescale_zero_snr=True).alphas_cumprod
        check_table(f"alphas_cumprod/zero_snr/{bs}", ours, ref.numpy(),
                    vp_alphas_cumprod64(UniPCMultistepScheduler, **zcfg).numpy())


# ------------------------------------------------------------------------------- ancestral RF Euler (LTX)


def _ltx_ref(sched, x0, nz, n):
    return run_diffusers(sched, x0, noise_list=nz, noise_patch=ltx_mod, max_steps=n)


@pytest.mark.parametrize("eta", [1.0, 0.5])
@pytest.mark.parametrize("n", STEPS)
def test_ancestral_matches_diffusers(n, eta):
    sched = LTXEulerAncestralRFScheduler.from_config(dict(FlowMatchEulerDiscreteScheduler(shift=3.0).config, eta=eta))
    sched.set_timesteps(n)
    sampler = FlowEulerAncestralSampler(shift=3.0, eta=eta)
    assert sampler.needs_noise
    plan = sampler.plan(n)
    _check_plan(plan, sched)
    x0, nz = initial_sample(), noises(n)
    check("flow_euler_ancestral", run_vidax(sampler, plan, x0, noise_list=nz), _ltx_ref(sched, x0, nz, n))


def test_ancestral_explicit_sigmas_and_dynamic_shift():
    # LTX distilled-style explicit schedule including the terminal 0, with s_noise
    sig = [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0]
    n = len(sig) - 1
    sched = LTXEulerAncestralRFScheduler(eta=1.0, s_noise=0.7)
    sched.set_timesteps(sigmas=sig)
    sampler = FlowEulerAncestralSampler(eta=1.0, s_noise=0.7)
    plan = sampler.plan(sigmas=sig)
    assert plan.num_steps == n
    assert np.array_equal(plan.sigmas, sched.sigmas.numpy())
    assert np.array_equal(plan.timesteps, sched.timesteps.numpy()[:-1])
    x0, nz = initial_sample(), noises(n)
    check("flow_euler_ancestral", run_vidax(sampler, plan, x0, noise_list=nz), _ltx_ref(sched, x0, nz, n))
    # resolution-dependent shift (LTX-Video's flow-match config), mu passed through
    cfg = dict(FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, shift_terminal=0.1).config)
    sched = LTXEulerAncestralRFScheduler.from_config(cfg)
    sched.set_timesteps(20, mu=2.05)
    sampler = sampler_from_scheduler_config(dict(sched.config, _class_name="LTXEulerAncestralRFScheduler"))
    assert isinstance(sampler, FlowEulerAncestralSampler) and sampler.shift_terminal == 0.1
    plan = sampler.plan(20, mu=2.05)
    _check_plan(plan, sched)
    x0, nz = initial_sample(), noises(20)
    check("flow_euler_ancestral", run_vidax(sampler, plan, x0, noise_list=nz), _ltx_ref(sched, x0, nz, 20))


@pytest.mark.parametrize("n", [2, 50])
def test_ancestral_eta0_is_flow_euler(n):
    sched = LTXEulerAncestralRFScheduler.from_config(dict(FlowMatchEulerDiscreteScheduler(shift=5.0).config, eta=0.0))
    sched.set_timesteps(n)
    sampler = FlowEulerAncestralSampler(shift=5.0, eta=0.0)
    assert not sampler.needs_noise
    plan = sampler.plan(n)
    x0 = initial_sample()
    ours = run_vidax(sampler, plan, x0)
    check("flow_euler_ancestral/eta0", ours, run_diffusers(sched, x0, max_steps=n))
    # eta 0 is the deterministic flow-match Euler: both vidax samplers against diffusers' (and its float64 twin)
    fm = FlowMatchEulerDiscreteScheduler(shift=5.0)
    fm.set_timesteps(n)
    fm_ref = run_diffusers(fm, x0)
    euler = FlowEulerSampler(shift=5.0)
    check("flow_euler_ancestral/eta0-vs-flow_euler", ours, fm_ref)
    check("flow_euler_ancestral/eta0-vs-flow_euler", run_vidax(euler, euler.plan(n), x0), fm_ref)


def test_ancestral_formula_float64():
    """The documented formula, in float64 numpy, against the fp32 sampler (eta=0.7, s_noise=0.9)."""
    n = 12
    sampler = FlowEulerAncestralSampler(shift=3.0, eta=0.7, s_noise=0.9)
    plan = sampler.plan(n)
    x0, nz = initial_sample(), noises(n)

    def formula(dt):
        c = np.dtype(dt).type
        s = plan.sigmas.astype(dt)
        x, out = x0.astype(dt), []
        for i in range(n):
            d = x - s[i] * denoiser(x, float(plan.timesteps[i]), dt)
            if s[i + 1] == 0:
                x = d
            else:
                sd = s[i + 1] * (c(1) + (s[i + 1] / s[i] - c(1)) * c(0.7))
                x = sd / s[i] * x + (c(1) - sd / s[i]) * d
                x = ((c(1) - s[i + 1]) / (c(1) - sd) * x
                     + np.sqrt(s[i + 1] ** 2
                               - sd ** 2 * (c(1) - s[i + 1]) ** 2 / (c(1) - sd) ** 2) * c(0.9) * nz[i].astype(dt))
            out.append(x.astype(dt))
        return out

    ours = run_vidax(sampler, plan, x0, noise_list=nz)
    # the formula evaluated in fp32 plays the reference: its error against itself in float64 sets the tolerance
    check("flow_euler_ancestral/float64-formula", ours, Trajectory(formula(np.float32), formula(np.float64)))


# ------------------------------------------------------------------------------- UniPC, VP modes


def _vp_x0(sched, prev, t, pred, dtype=np.float32):
    c = np.dtype(dtype).type
    s = c(np.float32(sched.sigmas[-2].item()))
    alpha = c(1) / np.sqrt(s * s + c(1))
    sig = s * alpha
    mo = denoiser(prev, t, dtype)
    return (prev - sig * mo) / alpha if pred == "epsilon" else alpha * prev - sig * mo


UNIPC_VP = [
    # (prediction, beta_schedule, beta_start, beta_end)
    ("epsilon", "linear", 1e-4, 0.02),
    ("v_prediction", "scaled_linear", 0.00085, 0.012),
]


@pytest.mark.parametrize("solver_type", ["bh2", "bh1"])
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("vp", UNIPC_VP, ids=["eps-linear", "v-scaled_linear"])
@pytest.mark.parametrize("n", [2, 50])
def test_unipc_vp_matches_diffusers(n, vp, order, solver_type):
    pred, bs, lo, hi = vp
    cfg = dict(prediction_type=pred, beta_schedule=bs, beta_start=lo, beta_end=hi, solver_order=order,
               solver_type=solver_type, use_flow_sigmas=False)
    sched = UniPCMultistepScheduler(**cfg)
    sched.set_timesteps(n)
    sampler = UniPCSampler(**cfg)
    plan = sampler.plan(n)
    _check_plan(plan, sched, "ulp")
    x0 = initial_sample()
    ours, ref = run_vidax(sampler, plan, x0), run_diffusers(sched, x0)
    if solver_type == "bh1":  # diffusers: NaN on the step onto sigma 0 (see phase-1 notes); vidax: the limit
        assert np.isnan(ref[-1]).all() and np.isnan(ref.f64[-1]).all()
        for traj, dt in ((ref, np.float32), (ref.f64, np.float64)):
            traj[-1] = _vp_x0(sched, x0.astype(dt) if n == 1 else traj[-2], float(sched.timesteps[-1]), pred, dt)
    assert np.isfinite(ours[-1]).all()
    check(f"unipc-vp/{pred}/order{order}/{solver_type}", ours, ref)


@pytest.mark.parametrize(
    "cfg",
    [
        dict(prediction_type="epsilon", beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
             use_karras_sigmas=True, solver_order=3),
        dict(prediction_type="v_prediction", beta_schedule="scaled_linear", use_karras_sigmas=True),
        dict(prediction_type="v_prediction", rescale_betas_zero_snr=True, timestep_spacing="trailing"),
        dict(prediction_type="epsilon", solver_order=3, final_sigmas_type="sigma_min", timestep_spacing="leading",
             steps_offset=1),
    ],
    ids=["karras-eps", "karras-v-cos", "zero_snr-v-trailing", "sigma_min-leading"],
)
@pytest.mark.parametrize("n", [1, 7, 50])
def test_unipc_vp_options(n, cfg):
    cfg = dict(cfg, use_flow_sigmas=False)
    sched = UniPCMultistepScheduler(**cfg)
    sched.set_timesteps(n)
    sampler = UniPCSampler(**cfg)
    plan = sampler.plan(n)
    _check_plan(plan, sched, sigmas=False if cfg.get("rescale_betas_zero_snr") else "ulp")
    # zero terminal SNR: the rescaled alphas_cumprod carry torch's sqrt ulps (see test above) -> ~5e-6 relative;
    # bounded by diffusers' own error against its sigmas from float64 alphas_cumprod
    twin = UniPCMultistepScheduler(**cfg)
    twin.alphas_cumprod = vp_alphas_cumprod64(UniPCMultistepScheduler, **cfg)
    twin.set_timesteps(n)
    check_table("unipc-vp/options/sigmas", plan.sigmas, sched.sigmas.numpy(), twin.sigmas.numpy())
    x0 = initial_sample()
    check("unipc-vp/options", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


# ------------------------------------------------------------------------------- DPM-Solver++


def _dpm_pair(**cfg):
    return DPMSolverMultistepScheduler(**cfg), DPMSolverSampler(**cfg)


DPM_FLOW = [(n, o, t) for o in (1, 2, 3) for t in ("midpoint", "heun") for n in (2, 50)] + [
    (n, o, "midpoint") for n in (1, 7) for o in (2, 3)]


@pytest.mark.parametrize("n, order, solver_type", DPM_FLOW)
def test_dpm_flow_matches_diffusers(n, order, solver_type):
    shift = 5.0 if solver_type == "heun" else 3.0
    sched, sampler = _dpm_pair(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=shift,
                               solver_order=order, solver_type=solver_type)
    sched.set_timesteps(n)
    plan = sampler.plan(n)
    _check_plan(plan, sched)
    x0 = initial_sample()
    check(f"dpm++-flow/order{order}/{solver_type}", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("vp", UNIPC_VP, ids=["eps-linear", "v-scaled_linear"])
@pytest.mark.parametrize("n", [7, 50])
def test_dpm_vp_matches_diffusers(n, vp, order):
    pred, bs, lo, hi = vp
    sched, sampler = _dpm_pair(prediction_type=pred, beta_schedule=bs, beta_start=lo, beta_end=hi,
                               solver_order=order, solver_type="heun" if order == 3 else "midpoint")
    sched.set_timesteps(n)
    plan = sampler.plan(n)
    _check_plan(plan, sched, "ulp")
    x0 = initial_sample()
    check(f"dpm++-vp/{pred}/order{order}", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


@pytest.mark.parametrize(
    "cfg, n",
    [
        (dict(use_karras_sigmas=True, beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
              solver_order=3), 20),
        (dict(use_lu_lambdas=True, prediction_type="v_prediction"), 12),
        (dict(use_exponential_sigmas=True), 10),
        (dict(final_sigmas_type="sigma_min", lower_order_final=False, solver_order=3), 20),
        (dict(final_sigmas_type="sigma_min", euler_at_final=True, timestep_spacing="trailing"), 20),
        (dict(lower_order_final=False, solver_order=3, timestep_spacing="leading", steps_offset=1), 8),
        (dict(prediction_type="v_prediction", rescale_betas_zero_snr=True, timestep_spacing="trailing"), 10),
        (dict(lambda_min_clipped=-5.1, beta_schedule="squaredcos_cap_v2"), 10),
    ],
    ids=["karras", "lu", "exponential", "sigma_min-no_lof", "euler_at_final", "leading-no_lof", "zero_snr", "clipped"],
)
def test_dpm_options(cfg, n):
    sched, sampler = _dpm_pair(**cfg)
    sched.set_timesteps(n)
    plan = sampler.plan(n)
    _check_plan(plan, sched, sigmas=False if cfg.get("rescale_betas_zero_snr") else "ulp")
    x0 = initial_sample()
    check("dpm++/options", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


def test_dpm_dynamic_shift_and_orders():
    sched, sampler = _dpm_pair(prediction_type="flow_prediction", use_flow_sigmas=True, use_dynamic_shifting=True,
                               solver_order=2)
    sched.set_timesteps(9, mu=1.3)
    plan = sampler.plan(9, mu=1.3)
    _check_plan(plan, sched)
    x0 = initial_sample()
    check("dpm++/options", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))
    np.testing.assert_array_equal(DPMSolverSampler(solver_order=3).orders(7), [1, 2, 3, 3, 3, 2, 1])
    np.testing.assert_array_equal(DPMSolverSampler(solver_order=3).orders(16)[-3:], [3, 3, 1])
    np.testing.assert_array_equal(
        DPMSolverSampler(solver_order=3, final_sigmas_type="sigma_min").orders(16)[-3:], [3, 3, 3])


# ------------------------------------------------------------------------------- CogVideoX

COG_2B = dict(beta_end=0.012, beta_schedule="scaled_linear", beta_start=0.00085, clip_sample=False,
              clip_sample_range=1.0, num_train_timesteps=1000, prediction_type="v_prediction",
              rescale_betas_zero_snr=True, sample_max_value=1.0, set_alpha_to_one=True, snr_shift_scale=3.0,
              steps_offset=0, timestep_spacing="trailing", trained_betas=None)
COG_5B = dict(COG_2B, snr_shift_scale=1.0)
# third: diffusers' class defaults (scaled_linear, leading) with v prediction, set_alpha_to_one=False, odd SNR shift
COG_CFGS = [COG_2B, COG_5B, dict(prediction_type="v_prediction", set_alpha_to_one=False, snr_shift_scale=1.7)]
COG_IDS = ["cogvideox-2b", "cogvideox-5b", "v-leading-linear"]
# epsilon prediction: the synthetic denoiser is no epsilon model, so x0 = (x - sqrt(1-a) eps) / sqrt(a) blows the
# trajectory up at low noise (|x| ~ 1e3 after 50 steps); checked on the deterministic DDIM only, at 7 steps
COG_EPS = dict(prediction_type="epsilon", beta_schedule="linear", beta_start=1e-4, beta_end=0.02,
               set_alpha_to_one=False, timestep_spacing="linspace")


def _cog_sampler(cls, cfg):
    return cls(**{k: v for k, v in cfg.items() if k not in ("clip_sample", "clip_sample_range", "sample_max_value")})


@pytest.mark.parametrize("n, cfg", [(n, c) for c in COG_CFGS for n in STEPS] + [(7, COG_EPS)],
                         ids=[f"{i}-{n}" for i in COG_IDS for n in STEPS] + ["eps-linspace-7"])
def test_cogvideox_ddim_matches_diffusers(n, cfg):
    sched = CogVideoXDDIMScheduler(**cfg)
    sched.set_timesteps(n)
    sampler = _cog_sampler(CogVideoXDDIMSampler, cfg)
    plan = sampler.plan(n)
    _check_plan(plan, sched, sigmas=False)
    assert plan.sigmas.shape == (n + 1,)
    x0 = initial_sample()
    check("cogvideox_ddim", run_vidax(sampler, plan, x0), run_diffusers(sched, x0, scale_input=True))


def _cog_dpm_loop(sched, x0, nz, second, dt):
    draws = []
    for i, z in enumerate(nz):  # a second-order step draws twice and uses the second draw
        if second[i]:
            draws.append(np.full_like(z, 1e3))
        draws.append(z)
    it = iter(draws)
    tdt = torch.float64 if dt == np.float64 else torch.float32
    orig = cogdpm_mod.randn_tensor
    cogdpm_mod.randn_tensor = lambda shape, generator=None, device=None, dtype=None: torch.from_numpy(next(it)).to(tdt)
    try:
        with keep_float64() if dt == np.float64 else contextlib.nullcontext():
            x, old, traj = torch.from_numpy(x0.astype(dt)), None, []
            ts = sched.timesteps
            for i, t in enumerate(ts):
                mo = torch.from_numpy(denoiser(sched.scale_model_input(x, t).numpy(), float(t), dt))
                x, old = sched.step(mo, old, t, ts[i - 1] if i > 0 else None, x, return_dict=False)
                assert x.dtype == tdt
                traj.append(x.numpy().copy())
    finally:
        cogdpm_mod.randn_tensor = orig
    assert next(it, None) is None
    return traj


def _cog_dpm_ref(sched, x0, nz, second):
    twin = float64_scheduler(sched)
    return Trajectory(_cog_dpm_loop(sched, x0, nz, second, np.float32), _cog_dpm_loop(twin, x0, nz, second, np.float64))


@pytest.mark.parametrize("cfg", COG_CFGS, ids=COG_IDS)
@pytest.mark.parametrize("n", STEPS)
def test_cogvideox_dpm_matches_diffusers(n, cfg):
    sched = CogVideoXDPMScheduler(**cfg)
    sched.set_timesteps(n)
    sampler = _cog_sampler(CogVideoXDPMSampler, cfg)
    assert sampler.needs_noise
    plan = sampler.plan(n)
    _check_plan(plan, sched, sigmas=False)
    x0, nz = initial_sample(), noises(n)
    ref = _cog_dpm_ref(sched, x0, nz, plan.extras["second_order"])
    check("cogvideox_dpm", run_vidax(sampler, plan, x0, noise_list=nz), ref)
    with pytest.raises(ValueError, match="noise"):
        sampler.step(plan.arrays(), sampler.init_state(plan, x0), 0, x0, x0)


# ------------------------------------------------------------------------------- config mapping


def test_scheduler_config_mapping_phase2():
    for cls, sampler_cls, cfg in (
        ("CogVideoXDDIMScheduler", CogVideoXDDIMSampler, COG_2B),
        ("CogVideoXDPMScheduler", CogVideoXDPMSampler, COG_5B),
    ):
        full = dict(cfg, _class_name=cls, _diffusers_version="0.30.0.dev0")
        s = sampler_from_scheduler_config(full)
        assert s == _cog_sampler(sampler_cls, cfg)
        assert s.prediction_type == "v_prediction" and s.rescale_betas_zero_snr and s.timestep_spacing == "trailing"
    dpm_cfg = dict(DPMSolverMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                               flow_shift=5.0, solver_order=3).config)
    s = sampler_from_scheduler_config(dict(dpm_cfg, _class_name="DPMSolverMultistepScheduler"))
    assert s == DPMSolverSampler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                 flow_shift=5.0, solver_order=3)
    sched = DPMSolverMultistepScheduler.from_config(dpm_cfg)
    sched.set_timesteps(30)
    _check_plan(s.plan(30), sched)
    assert sampler_from_scheduler_config({"_class_name": "DPMSolverMultistepScheduler",
                                          "solver_type": "bh2"}).solver_type == "midpoint"
    s = sampler_from_scheduler_config({"_class_name": "LTXEulerAncestralRFScheduler", "eta": 0.5})
    assert s == FlowEulerAncestralSampler(eta=0.5)
    assert {"CogVideoXDDIMScheduler", "CogVideoXDPMScheduler", "DPMSolverMultistepScheduler",
            "LTXEulerAncestralRFScheduler", "FlowMatchEulerDiscreteScheduler",
            "UniPCMultistepScheduler"} <= set(supported_scheduler_classes())
    assert {"flow_euler_ancestral", "dpm_solver++", "cogvideox_ddim", "cogvideox_dpm"} <= set(available_samplers())


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"_class_name": "DDIMScheduler"}, "supported: .*CogVideoXDDIMScheduler.*DPMSolverMultistepScheduler"),
        ({"_class_name": "DPMSolverMultistepScheduler", "algorithm_type": "sde-dpmsolver++"},
         "supported: dpmsolver\\+\\+"),
        ({"_class_name": "DPMSolverMultistepScheduler", "thresholding": True}, "thresholding"),
        ({"_class_name": "DPMSolverMultistepScheduler", "variance_type": "learned_range"}, "variance_type"),
        ({"_class_name": "DPMSolverMultistepScheduler", "solver_order": 4}, "solver_order"),
        ({"_class_name": "CogVideoXDDIMScheduler", "prediction_type": "flow"}, "prediction_type"),
        ({"_class_name": "CogVideoXDPMScheduler", "frobnicate": 1}, "frobnicate"),
        ({"_class_name": "LTXEulerAncestralRFScheduler", "stochastic_sampling": True}, "stochastic_sampling"),
    ],
)
def test_phase2_config_errors_one_line(cfg, match):
    with pytest.raises(SchedulerConfigError, match=match) as e:
        sampler_from_scheduler_config(cfg)
    assert "\n" not in str(e.value)


def test_phase2_registry_errors_one_line():
    for name, kw, match in (
        ("dpm_solver++", dict(order=2), "supported options: .*solver_order"),
        ("cogvideox_ddim", dict(eta=0.5), "supported options: .*snr_shift_scale"),
        ("flow_euler_ancestral", dict(noise_scale=1.0), "supported options: .*eta.*s_noise"),
        ("dpm_solver++", dict(solver_type="bh2"), "midpoint"),
    ):
        with pytest.raises(ValueError, match=match) as e:
            get_sampler(name, **kw)
        assert "\n" not in str(e.value)
    # plan-only options share the compiled step
    assert DPMSolverSampler(flow_shift=5.0, solver_type="heun").step_key() == DPMSolverSampler().step_key()
    assert FlowEulerAncestralSampler(eta=0.3).step_key() == FlowEulerAncestralSampler(shift=5.0).step_key()
    assert CogVideoXDDIMSampler(snr_shift_scale=1.0).step_key() == CogVideoXDDIMSampler().step_key()


def test_the_derived_tolerance_is_tight():
    """The float64 twin really runs in float64 (the reference's own fp32 error is not zero) and the tolerance
    derived from it stays far below a 1e-5 relative step error, so the trajectory checks above can fail."""
    from test_schedulers_util import tolerance, traj_err_l2

    n = 20
    sched, _ = _dpm_pair(**SIGMA_MIN_NO_LOF)
    sched.set_timesteps(n)
    ref = run_diffusers(sched, initial_sample())
    own = traj_err_l2(ref, ref.f64)
    assert 0 < own and tolerance(own) < 1e-5, own


# ------------------------------------------------------------------------------- the tolerance still catches bugs

SIGMA_MIN_NO_LOF = dict(final_sigmas_type="sigma_min", lower_order_final=False, solver_order=3)


@pytest.mark.parametrize("bug", ["sign-flip", "final-sigma-zero", "coefficient-1e-5"])
def test_a_wrong_sampler_fails(bug):
    """The derived tolerance on the case that failed on AVX-512 Xeons still rejects a wrong sampler: the model
    output's sign flipped, the last step landing on 0 instead of sigma_min, or one step's update coefficient
    (x_t / x_s weight, i.e. the sigma ratio of that step) off by 1e-5 relative."""
    from dataclasses import replace

    n = 20
    sched, sampler = _dpm_pair(**SIGMA_MIN_NO_LOF)
    sched.set_timesteps(n)
    x0 = initial_sample()
    ref = run_diffusers(sched, x0)
    plan = sampler.plan(n)
    check("dpm++/sigma_min-no_lof", run_vidax(sampler, plan, x0), ref)  # the right sampler passes
    model = denoiser
    if bug == "sign-flip":
        model = lambda x, t: -denoiser(x, t)  # noqa: E731
    elif bug == "final-sigma-zero":
        sampler = DPMSolverSampler(**dict(SIGMA_MIN_NO_LOF, final_sigmas_type="zero"))
        plan = sampler.plan(n)
    else:
        extras = dict(plan.extras)
        extras["dpm_A"] = extras["dpm_A"].copy()
        extras["dpm_A"][n // 2] *= np.float32(1 + 1e-5)
        plan = replace(plan, extras=extras)
    with pytest.raises(AssertionError, match="tolerance") as err:
        check("deliberately-wrong", run_vidax(sampler, plan, x0, model=model), ref)
    print(f"\n{bug}: {str(err.value).splitlines()[0]}")
