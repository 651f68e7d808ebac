"""A loaded Helios model called twice with the same seed makes the same video, bit for bit: the chunk history the
windows condition on belongs to one call, never to the plan a later call runs again (`vidax bench`'s second video
runs the load's own plan; a prepared API call may be run twice)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.xdist_group("helios_loaded")

# two chunks of 3 latent frames: the second conditions on the first's history
CALL = ["model.id=helios-base", "model.checkpoint=builtin:tiny-random", "sampling.num_steps=2", "sampling.height=32",
        "sampling.width=32", "sampling.num_frames=18", "sampling.max_sequence_length=16",
        "options.history_sizes=[4, 2, 1]", "options.num_latent_frames_per_chunk=3"]


def test_bench_second_video_is_the_first():
    from vidax_core import config as config_mod
    from vidax_core.bench import command as bench
    from vidax_core.plugins import get_plugins

    cfg = bench.resolve_case(None, CALL, [], get_plugins().preset_for)
    m = bench.run_vidax_case(config_mod.to_dict(cfg))
    assert m["num_windows"] == 2
    assert m["second_video_same"] is True


def test_a_prepared_call_run_twice_is_one_video():
    import vidax

    with vidax.load(CALL[0].split("=")[1], *CALL[1:]) as pipe:
        prepared = pipe.prepare(prompt="a fox", seed=3)
        first, second = pipe.run(prepared), pipe.run(prepared)
    assert first.metrics["num_windows"] == 2
    np.testing.assert_array_equal(first.latents, second.latents)
    np.testing.assert_array_equal(first.frames, second.frames)
