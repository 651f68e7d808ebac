"""The denoiser of a load: built from the plugin's ``build_dit`` (one, or several experts switched by timestep),
converted from the checkpoint and placed once; each :class:`Expert` keeps the steps compiled over its weights,
one per call structure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from flax import nnx

from vidax_core.config import RunConfig
from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint
from vidax_core.model_api import DitBuild
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.parallel import offload as offloadlib
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec
from vidax_core.runner.offload_step import OffloadedStep
from vidax_core.runner.plan import Placement
from vidax_core.report.progress import Reporter
from vidax_core.runner.step import StepPlan, make_step


def build_dit(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> list[DitBuild]:
    """The denoiser builds of ``spec``: one, or several experts switched by timestep."""
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    if build is None:
        raise UserError(f"no installed plugin builds the denoiser of {spec.id}")
    from vidax_core.quant import policy as quant_policy  # 8-bit block weights (model.weight_dtype or the file's)

    return quant_policy.builds_for_run(list(build) if isinstance(build, (list, tuple)) else [build], spec, ckpt, cfg,
                                       plugins)


def load_dit(
    spec: ModelSpec,
    ckpt: Checkpoint,
    cfg: RunConfig,
    plugins: Plugins,
    reporter: Reporter,
    build: DitBuild | None = None,
    put: Callable[[tuple, np.ndarray], Any] | None = None,
    adapters: Any = None,
) -> tuple[DitBuild, nnx.Module]:
    """Build the denoiser abstractly, convert its checkpoint, and place every array with ``put(path, array)``.
    ``adapters`` (:func:`vidax_core.lora.prepare`, checked earlier) are fused into the tensors before conversion,
    or with ``lora_mode: unfused`` (:mod:`vidax_core.lora.unfused`) fill the factor parameters of the build."""
    build = build or build_dit(spec, ckpt, cfg, plugins)[0]
    graphdef, abstract_state, flat = abstract_model(build.ctor)
    if adapters is None and getattr(cfg, "lora", None):
        from vidax_core import lora

        adapters = lora.prepare(cfg, spec, ckpt, [build], plugins)
    from vidax_core.quant import policy as quant_policy  # scales of an 8-bit file folded into their weights

    tensors = quant_policy.tensors_for_load(ckpt.tensors(build.component), f"{ckpt.source} ({build.component})",
                                            reporter.log)
    if adapters is not None:  # an 8-bit weight is read dequantised, the sum quantized again with fresh scales
        tensors = adapters.fused(build.component, tensors)
    values = plugins.call("convert_checkpoint", spec, component=build.component, tensors=tensors,
                          abstract=flat if adapters is None else adapters.convertible(flat),
                          config=ckpt.config(build.component))
    if values is None:
        raise UserError(f"no installed plugin converts the {build.component} checkpoint of {spec.id}")
    if adapters is not None:  # lora_mode=unfused: the factors are parameters of their own
        values = {**values, **adapters.slot_values(build.component, flat)}
    return build, materialize(graphdef, abstract_state, values, put=put)


@dataclass
class Expert:
    """One loaded denoiser (a model has one, Wan2.2 A14B has two switched by timestep). Its weights are placed
    once; each distinct call structure compiles its own step over them (:meth:`make_step`), kept for reuse."""

    build: DitBuild
    placement: Placement
    model: Any  # the live module when its blocks are streamed from the host, else None
    graphdef: Any = None
    params: Any = None
    step: Any = None
    steps: dict = field(default_factory=dict)
    finalizers: dict = field(default_factory=dict)
    rest_counted: bool = False
    host: dict = field(default_factory=dict)  # streamed group -> its HostChunks

    def make_step(self, plan: StepPlan, cfg: RunConfig, tracker: offloadlib.ResidentTracker,
                  key: Any = None) -> bool:
        """Select the step for ``plan``: the one compiled for ``key`` earlier, or a new one. True when new."""
        if key is not None and key in self.steps:
            self.step = self.steps[key]
            return False
        pl = self.placement
        if self.model is not None:
            self.step = OffloadedStep(self.model, plan, pl, self.host, tracker)
        else:
            self.step = make_step(self.graphdef, plan, pl.mesh, pl.rules)
        if key is not None:
            if len(self.steps) >= 8:
                old = self.steps.pop(next(iter(self.steps)))
                if old is not self.step and self.model is not None:
                    old.release()
            self.steps[key] = self.step
        return True

    def release(self) -> None:
        if self.model is not None and self.step is not None:
            self.step.release()

    def drop_weights(self) -> None:
        """Free the weights (device arrays, streamed chunks in host memory) and keep what the metrics read (the
        build, the placement, the steps' chunk sizes and overlap): a single run's decode then has the devices and
        the host without the denoiser."""
        if self.model is not None:
            for st in {id(s): s for s in [*self.steps.values(), self.step] if s is not None}.values():
                st.drop_weights()
        self.params = self.model = None
        self.host = {}

    def close(self) -> None:
        """Free this expert's weights and compiled steps."""
        self.drop_weights()
        self.steps.clear()
        self.finalizers.clear()
        self.step = None
