"""vidax samplers: host-planned, jit-friendly ports of the diffusers schedulers video models ship with.

Usage (what the pipeline does)::

    sampler = sampler_from_scheduler_config(json.load(open("scheduler/scheduler_config.json")))
    plan = sampler.plan(num_steps)                 # host, numpy
    pa = plan.arrays()                             # pytree of jnp arrays
    state = sampler.init_state(plan, latents)

    @jax.jit
    def body(pa, state, i, latents, ...):          # i: traced int32
        t = pa["timesteps"][i]
        x_in = sampler.scale_model_input(pa, i, latents)
        out = model(x_in, t, ...)
        return sampler.step(pa, state, i, out, latents, noise)
"""

from .base import (
    Sampler,
    SamplerPlan,
    SchedulerConfigError,
    available_samplers,
    calculate_shift,
    get_sampler,
    register_sampler,
    register_scheduler_class,
    sampler_from_scheduler_config,
    supported_scheduler_classes,
)
from vidax_core.schedulers.cogvideox import CogVideoXDDIMSampler, CogVideoXDPMSampler
from vidax_core.schedulers.dpm import DPMSolverSampler
from vidax_core.schedulers.flow_ancestral import FlowEulerAncestralSampler
from vidax_core.schedulers.flow_euler import FlowEulerSampler
from vidax_core.schedulers.flow_map import FlowMapEulerSampler
from vidax_core.schedulers.piflow import PiflowSampler
from vidax_core.schedulers import helios as _helios  # noqa: F401 - registers HeliosScheduler
from vidax_core.schedulers.unipc import UniPCSampler

__all__ = [
    "Sampler",
    "SamplerPlan",
    "SchedulerConfigError",
    "available_samplers",
    "calculate_shift",
    "get_sampler",
    "register_sampler",
    "register_scheduler_class",
    "sampler_from_scheduler_config",
    "supported_scheduler_classes",
    "CogVideoXDDIMSampler",
    "CogVideoXDPMSampler",
    "DPMSolverSampler",
    "FlowEulerAncestralSampler",
    "FlowEulerSampler",
    "FlowMapEulerSampler",
    "PiflowSampler",
    "UniPCSampler",
]
