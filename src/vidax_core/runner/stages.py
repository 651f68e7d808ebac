"""Frame stages: another model run over the decoded frames of a run (hook ``frame_stages``,
:class:`vidax_core.model_api.FrameStage`), e.g. a video super-resolution model after a generator.

A stage is an ordinary run of a registered video-to-video model id: its config is resolved as a run's (core
defaults < the stage id's preset < the parent run's placement keys < the stage's ``overrides``), its ``video:``
is the frames the stage before it made, handed over losslessly as a float ``.npy`` clip in a folder of the
parent's, and it writes no file of its own: the parent's outputs get the last stage's frames (and the parent's
audio). Each stage is a :class:`vidax_core.runner.loaded.LoadedModel` built when the parent is, so every check it
makes (config, checkpoint, plan) runs before any weight loads; ``vidax run`` frees the parent's denoiser before a
stage places its weights, a loaded pipe keeps every stage loaded between calls.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np

from vidax_core.config import RunConfig, defaults_dict, merge, to_dict, validate
from vidax_core.errors import UserError
from vidax_core.model_api import FrameStage

INHERITED = ("parallel", "attention", "offload", "runtime", "distributed")
NO_OUTPUTS = {"path": None, "save_latents": None, "save_frames": None, "save_audio": None, "metrics": None}


def frame_stages(spec: Any, ckpt: Any, cfg: RunConfig, plugins: Any) -> list[FrameStage]:
    """The family's stages for ``cfg`` (hook ``frame_stages``), each naming a registered id that takes a video."""
    stages = list(plugins.call("frame_stages", spec, ckpt=ckpt, run=cfg) or [])
    for st in stages:
        other = plugins.registry.get(st.model)  # an unknown id is one UserError line
        if "v2v" not in other.tasks:
            raise UserError(f"{spec.id}: its {st.name or 'frame stage'} names {st.model}, which takes no video "
                            f"(tasks: {', '.join(other.tasks)})")
    return stages


def stage_config(parent: RunConfig, stage: FrameStage, plugins: Any, video: str) -> RunConfig:
    """The stage's run (module docstring); ``video`` the path its input clip is written to."""
    spec = plugins.registry.get(stage.model)
    d = to_dict(parent)
    inherited: dict[str, Any] = {k: d[k] for k in INHERITED}
    inherited["model"] = {"id": stage.model, "dtype": d["model"]["dtype"]}
    inherited["sampling"] = {"seed": parent.sampling.seed}
    return validate(merge(defaults_dict(), dict(spec.preset), inherited, dict(stage.overrides),
                          {"video": video, "output": dict(NO_OUTPUTS), "prompts": None}))


class StageChain:
    """The frame stages of one loaded model: built (checked, planned, no weights) with it, run after its decode."""

    def __init__(self, parent: Any, cfg: RunConfig, make: Any) -> None:
        """``make(stage config)``: the stage's loaded model, built without its weights."""
        self.parent, self.plugins = parent, parent.plugins
        self.stages = frame_stages(parent.spec, parent.ckpt, cfg, self.plugins)
        if self.stages and parent.first_plan.windows is not None:
            raise UserError(f"the plugin of {parent.spec.id} plans both windows and frame stages (plugin bug: "
                            "report it)")
        self.folder = tempfile.mkdtemp(prefix="vidax-stage-") if self.stages else None
        self.models: list[Any] = []
        for k, st in enumerate(self.stages):
            parent.reporter.log(f"stage {k + 1}: {st.name or st.model} ({st.model}) over the decoded frames")
            try:
                self.models.append(make(stage_config(cfg, st, self.plugins, self._video(k))))
            except UserError as exc:  # the stage's own check, said as the stage's
                self.close()
                raise UserError(f"{st.name or 'frame stage'} ({st.model}): {exc}") from None

    def _video(self, k: int) -> str:
        return os.path.join(self.folder, f"stage{k}.npy")

    def __bool__(self) -> bool:
        return bool(self.stages)

    def describe(self) -> list[str]:
        return [f"then:       {st.name or 'stage'}: {st.model} over the decoded frames" for st in self.stages]

    def run(self, cfg: RunConfig, frames: np.ndarray) -> tuple[np.ndarray, list[dict]]:
        """The frames after every stage of ``cfg``'s call, and each stage's metrics."""
        stages = frame_stages(self.parent.spec, self.parent.ckpt, cfg, self.plugins)
        if [s.model for s in stages] != [s.model for s in self.stages]:
            raise UserError(f"this call's frame stages ({', '.join(s.model for s in stages) or 'none'}) differ from "
                            "the load's: load the model again with the call's options")
        if self.parent.single:  # vidax run: the parent's denoiser leaves the devices before a stage's arrives
            self.parent.release_weights()
        metrics = []
        for k, (st, model) in enumerate(zip(stages, self.models)):
            path = self._video(k)
            np.save(path, np.ascontiguousarray(frames, np.float32))
            try:
                scfg = stage_config(cfg, st, self.plugins, path)
                result = model.generate(model.base if scfg == model.base else scfg, write_outputs=False)
            finally:
                os.remove(path)
            frames = result.frames
            metrics.append({"model": st.model, "name": st.name, **result.metrics})
        return frames, metrics

    def close(self) -> None:
        for m in self.models:
            m.close()
        self.models = []
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)

