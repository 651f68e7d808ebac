"""diffusers' ``HeliosScheduler`` (Helios) read as the core samplers it is, for one-stage checkpoints.

With ``stages: 1`` (HeliosPipeline) it is UniPC (``scheduler_type: unipc``) or flow Euler (``euler``) on flow sigmas
the pipeline hands it (``set_timesteps(sigmas=..., mu=...)``), time-shifted by ``mu`` when
``use_dynamic_shifting`` is on, with float model timesteps ``sigma x T``; the config's ``shift`` applies only when
no sigmas are given, which HeliosPipeline never does, so the samplers are built unshifted. The last step lands on
sigma 0, where diffusers clamps sigma to 1e-8 (a 1e-8 relative difference). More stages are the pyramid
pipeline's schedule (HeliosPyramidPipeline), which vidax does not run.
"""

from __future__ import annotations

from .base import ConfigReader, SchedulerConfigError, register_scheduler_class
from .flow_euler import FlowEulerSampler
from .unipc import UniPCSampler


def _from_config(cfg: dict):
    r = ConfigReader("HeliosScheduler", cfg, cosmetic=("stage_range", "gamma", "shift"))
    stages = r.take("stages", 3)
    if stages != 1:
        raise SchedulerConfigError(f"HeliosScheduler: stages={stages} is HeliosPyramidPipeline's multi-scale "
                                   "schedule, which vidax does not run (only stages=1, HeliosPipeline's)")
    kind = r.take("scheduler_type", "unipc")
    dynamic = r.take("use_dynamic_shifting", False)
    shift_type = r.take("time_shift_type", "exponential")
    T = r.take("num_train_timesteps", 1000)
    r.require_default("thresholding", False)
    r.require_default("solver_p", None)
    r.require_default("use_flow_sigmas", True)
    if kind == "euler":
        for name, default in (("prediction_type", "flow_prediction"), ("solver_order", 2), ("predict_x0", True),
                              ("solver_type", "bh2"), ("lower_order_final", True), ("disable_corrector", [])):
            r.take(name, default)  # UniPC's fields: the Euler step reads none of them
        r.finish()
        return FlowEulerSampler(num_train_timesteps=T, use_dynamic_shifting=dynamic, time_shift_type=shift_type)
    if kind != "unipc":
        raise SchedulerConfigError(f"HeliosScheduler: scheduler_type={kind!r} is not supported (unipc or euler)")
    opts = dict(
        prediction_type=r.take("prediction_type", "flow_prediction"), solver_order=r.take("solver_order", 2),
        predict_x0=r.take("predict_x0", True), solver_type=r.take("solver_type", "bh2"),
        lower_order_final=r.take("lower_order_final", True),
        disable_corrector=tuple(r.take("disable_corrector", []) or ()))
    r.finish()
    if opts["solver_type"] in ("midpoint", "heun", "logrho"):  # diffusers maps these to bh2
        opts["solver_type"] = "bh2"
    try:
        return UniPCSampler(num_train_timesteps=T, use_flow_sigmas=True, flow_shift=1.0,
                            use_dynamic_shifting=dynamic, time_shift_type=shift_type, integer_timesteps=False, **opts)
    except ValueError as e:
        raise SchedulerConfigError(f"HeliosScheduler: {e}") from None


register_scheduler_class("HeliosScheduler", _from_config)
