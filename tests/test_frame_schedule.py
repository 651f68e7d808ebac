"""Diffusion forcing in the core (:mod:`vidax_core.schedulers.frame_schedule`) against diffusers' SkyReels-V2
pipeline: the forcing table of ``generate_timestep_matrix``, and a per-frame UniPC run against one deep-copied
``UniPCMultistepScheduler`` per frame stepped only where the table says (the reference's loop)."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.schedulers.frame_schedule import PerFrameSampler, forcing_rows
from vidax_core.schedulers.unipc import UniPCSampler

CASES = [  # frames, steps, ar_step, causal block, ready prefix frames
    (6, 4, 0, 1, 0),  # synchronous
    (6, 4, 0, 1, 2),  # synchronous with a clean prefix (a later window)
    (8, 5, 2, 2, 0),  # asynchronous blocks
    (8, 5, 3, 2, 4),  # asynchronous with a prefix
]


@pytest.mark.parametrize("frames, steps, ar, cbs, ready", CASES)
def test_forcing_rows_match_diffusers(frames, steps, ar, cbs, ready):
    import torch
    from diffusers import SkyReelsV2DiffusionForcingPipeline

    template = torch.arange(steps, 0, -1) * 100
    matrix, index, update, _ = SkyReelsV2DiffusionForcingPipeline.generate_timestep_matrix(
        None, frames, template, frames, ar, ready, cbs)
    rows, mine = forcing_rows(frames, steps, ar_step=ar, causal_block_size=cbs, num_pre_ready=ready)
    np.testing.assert_array_equal(rows, index.numpy())
    np.testing.assert_array_equal(mine, update.numpy())


def test_forcing_rows_refuse_partial_blocks():
    with pytest.raises(ValueError, match="causal blocks of 3"):
        forcing_rows(7, 4, causal_block_size=3)


@pytest.mark.parametrize("in_place", [True, False])
def test_per_frame_unipc_matches_one_scheduler_per_frame(in_place):
    """Asynchronous table with a prefix: each frame's UniPC history and order ramp are its own. ``in_place``: the
    reference's loop, which writes each update into the frame view its scheduler kept as ``last_sample``
    (UniPC's ``last_in_place``); else a copy is handed to the scheduler."""
    import torch
    from diffusers import UniPCMultistepScheduler

    frames, steps, ar, cbs, ready = 6, 5, 2, 2, 2
    rows, update = forcing_rows(frames, steps, ar_step=ar, causal_block_size=cbs, num_pre_ready=ready)
    base = UniPCSampler(flow_shift=5.0, last_in_place=in_place)
    sampler = PerFrameSampler(base)
    plan = sampler.plan_rows(base.plan(steps), rows, update, start=999.0)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((1, 3, frames, 2, 2)).astype(np.float32)
    outs = rng.standard_normal((len(rows), 1, 3, frames, 2, 2)).astype(np.float32)

    ref = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=5.0)
    ref.set_timesteps(steps)
    per_frame = [copy.deepcopy(ref) for _ in range(frames)]
    want = torch.from_numpy(x0.copy())
    step_template = torch.cat([torch.tensor([999]), ref.timesteps, torch.tensor([0])])
    for r in range(len(rows)):
        t = step_template[torch.from_numpy(rows[r]).long()]
        for f in range(frames):
            if update[r, f]:
                frame = want[:, :, f] if in_place else want[:, :, f].clone()
                want[:, :, f] = per_frame[f].step(torch.from_numpy(outs[r][:, :, f]), t[f], frame,
                                                  return_dict=False)[0]
    np.testing.assert_array_equal(np.asarray(plan.extras["frame_t"]), step_template[rows].numpy().astype(np.float32))

    arrays = plan.arrays()
    x = jnp.asarray(x0)
    state = sampler.init_state(plan, x)
    step = jax.jit(sampler.step)
    for r in range(len(rows)):
        x, state = step(arrays, state, np.int32(r), jnp.asarray(outs[r]), x)
    np.testing.assert_allclose(np.asarray(x), want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(x)[:, :, :ready], x0[:, :, :ready])  # the clean prefix never moves
