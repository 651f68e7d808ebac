"""``vidax run --dry-run`` prints the very plan a real call runs: both come from the planner
(:class:`vidax_core.runner.plan.Planner`) and :func:`~vidax_core.runner.plan.plan_lines`.

For every family's demo config the dry run's plan lines equal those of the plan a loaded model makes for its base
call (the plan ``vidax run`` executes; no weight is read for either); one real run logs exactly the dry run's
lines."""

from __future__ import annotations

import glob
import os

import pytest

from vidax_core import config as config_mod
from vidax_core.plugins import get_plugins
from vidax_core.report.dry_run import describe_plan
from vidax_core.runner.loaded import LoadedModel, run
from vidax_core.runner.plan import plan_lines
from vidax_core.report.progress import Reporter

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
DEMOS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CONFIGS, "*demo*.yaml")))
NO_OUTPUT = ["output.path=", "output.metrics=null"]
PLAN_HEADS = ("plan:", "pass ", "windows:", "frames:", "kv cache:", "mesh:")


def _plan_part(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(PLAN_HEADS)]


class Recorder(Reporter):
    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


def _config(name: str, *extra: str):
    return config_mod.resolve(os.path.join(CONFIGS, name), [*NO_OUTPUT, *extra], get_plugins().preset_for)


def test_every_family_has_a_demo():
    from repo_models import repo_specs

    registry = get_plugins().registry
    covered = {registry.get(_config(d).model.id).family for d in DEMOS}
    assert {spec.family for spec in repo_specs()} <= covered, covered


@pytest.mark.parametrize("demo", DEMOS)
def test_dry_run_prints_the_plan_a_call_runs(demo):
    plugins = get_plugins()
    cfg = _config(demo)
    dry = _plan_part(describe_plan(cfg, plugins))
    model = LoadedModel(cfg, plugins, Recorder(), load_weights=False)
    try:
        plan = model.first_plan
        assert plan.complete, "the family gives its latent grid without the VAE: the plan is whole before loading"
        assert dry == plan_lines(plan)
        windows = 1 if plan.windows is not None else 0
        trimmed = int(windows and plan.made_frames not in (None, cfg.sampling.num_frames))  # a frames: line
        cached = 1 if plan.kv_cache is not None else 0
        assert dry[-1].startswith("mesh:") and len(dry) == len(plan.passes) + windows + trimmed + cached + 1
    finally:
        model.close()


def test_a_real_run_logs_the_dry_runs_plan():
    plugins = get_plugins()
    cfg = _config("demo.yaml", "sampling.num_steps=2", "sampling.height=32", "sampling.width=32",
                  "sampling.num_frames=5", "sampling.max_sequence_length=16")
    recorder = Recorder()
    run(cfg, plugins, recorder)
    dry = _plan_part(describe_plan(cfg, plugins))
    assert _plan_part("\n".join(recorder.lines)) == dry and dry[0].startswith("plan:       5 frames at 32x32, 2 steps")
