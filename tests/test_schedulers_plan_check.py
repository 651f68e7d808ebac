"""The plan check used before anything loads: finite values everywhere except a +inf noise level (zero terminal
SNR, as the CogVideoX hub scheduler configs give), which must not be refused."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.io.checkpoint import _check_scheduler_config
from vidax_core.schedulers.base import plan_values_ok

pytestmark = pytest.mark.xdist_group("schedulers_plan_check")

COGVIDEOX_DDIM = {"_class_name": "CogVideoXDDIMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
                  "beta_start": 0.00085, "clip_sample": False, "num_train_timesteps": 1000,
                  "prediction_type": "v_prediction", "rescale_betas_zero_snr": True, "set_alpha_to_one": True,
                  "snr_shift_scale": 3.0, "steps_offset": 0, "timestep_spacing": "trailing"}


def test_zero_terminal_snr_config_passes():
    _check_scheduler_config("scheduler_config.json", COGVIDEOX_DDIM)  # sigmas[0] is +inf: no error


def test_plan_values_ok():
    assert plan_values_ok({"timesteps": np.array([999.0, 499.0]), "sigmas": np.array([np.inf, 1.0, 0.0])})
    assert not plan_values_ok({"sigmas": np.array([np.nan, 1.0])})
    assert not plan_values_ok({"sigmas": np.array([-np.inf, 1.0])})
    assert not plan_values_ok({"timesteps": np.array([np.inf, 1.0])})
