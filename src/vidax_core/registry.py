"""The model registry: one frozen :class:`ModelSpec` per model id, filled by the ``register_models`` hook."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Mapping

from vidax_core.errors import UserError


@dataclass(frozen=True)
class Option:
    """A family knob under ``options:`` (named as the family's diffusers pipeline call argument where one exists):
    its default, type (``int``, ``float``, ``bool``, ``str``, ``float | None`` ...), a one-line help text and
    optionally the allowed values. ``load_bound``: the loaded model is built for the loading run's value (a
    latent layout depends on it), so a call of a loaded pipe that changes it is refused with one line."""

    default: Any
    type: Any
    help: str = ""
    choices: tuple | None = None
    load_bound: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """What the core knows about a model id before loading anything.

    ``preset`` holds config defaults for this model (same keys as the run config, e.g. sampling steps);
    ``default_config`` names the YAML under configs/ users start from; ``hub_repo`` the published diffusers repo
    (at ``hub_revision``, null = its main branch), the checkpoint a run of the id alone downloads on first use (the
    preset's ``model.checkpoint`` / ``model.revision``); ``original_repo`` the original release vidax also reads
    (``owner/name`` or ``owner/name/path`` of the files in it), None when vidax reads none or none is published;
    ``hub_variants`` published repos of other weights for the same architecture and id (e.g. CFG-distilled
    checkpoints, run with their own configs), or ``owner/name/sub/folder`` for weights published only inside
    another layout's repo (a config then names a local folder ending in ``sub/folder``, assembled by hand);
    ``tiling`` the knobs its VAE's ``vae.tiling`` takes.
    """

    id: str
    family: str
    tasks: tuple[str, ...] = ("t2v",)
    plugin: str = ""
    version: str = ""
    default_config: str | None = None
    hub_repo: str | None = None
    hub_revision: str | None = None
    original_repo: str | None = None
    hub_variants: tuple[str, ...] = ()
    checkpoint_formats: tuple[str, ...] = ("diffusers",)
    description: str = ""
    preset: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Option] = field(default_factory=dict)
    #: The VAE's ``vae.tiling`` knobs, name -> bool / int / float (a fraction), as its diffusers ``enable_tiling``
    #: names them; None: the core's :class:`~vidax_core.vae.tiling.TilingOptions`. Checked once, before loading.
    tiling: Mapping[str, Any] | None = None
    #: ComfyUI file names of each component (``fnmatch`` patterns, e.g. ``{"transformer": ("wan2.1_t2v_1.3b*",)}``),
    #: as Comfy-Org publishes them: how a ComfyUI models folder's files are
    #: told apart (:mod:`vidax_core.io.component_files`).
    comfy_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Frames one untiled decode program of its VAE makes (a causal chunk, a time tile); None: the whole video.
    #: What the dry run sizes the decode's temporaries by (:mod:`vidax_core.vae.decode_memory`).
    vae_decode_frames: int | None = None
    #: ``sampling.*`` keys the model fills in itself when a run leaves them unset: ``"num_frames"`` (LTX-2.5's
    #: duration head, hook ``predict_num_frames``), ``"guidance_scale"`` (the checkpoint's own, e.g. its diffusers
    #: guider config, read by the model's ``guidance`` hook); every other key without a preset default must be set.
    predicts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.hub_repo:  # the id alone runs: its published repo is the preset's checkpoint (show-config shows it)
            preset = dict(self.preset)
            model = {"checkpoint": self.hub_repo, "revision": self.hub_revision}
            preset["model"] = {**model, **dict(preset.get("model") or {})}
            object.__setattr__(self, "preset", preset)
        if self.options:  # the declared options' defaults become part of the preset (shown by show-config)
            preset = dict(self.preset)
            preset["options"] = {**{k: o.default for k, o in self.options.items()}, **dict(preset.get("options") or {})}
            object.__setattr__(self, "preset", preset)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "family": self.family,
            "tasks": list(self.tasks),
            "plugin": self.plugin,
            "version": self.version,
            "default_config": self.default_config,
            "hub_repo": self.hub_repo,
            "hub_revision": self.hub_revision,
            "original_repo": self.original_repo,
            "hub_variants": list(self.hub_variants),
            "checkpoint_formats": list(self.checkpoint_formats),
            "description": self.description,
            "options": {k: {"default": o.default, "help": o.help} for k, o in self.options.items()},
            "predicts": list(self.predicts),
        }


class Registry:
    """Model id -> ModelSpec, with a helpful error for unknown ids."""

    def __init__(self) -> None:
        self._specs: dict[str, ModelSpec] = {}

    def register(self, spec: ModelSpec) -> None:
        if spec.id in self._specs and self._specs[spec.id] != spec:
            raise ValueError(f"model id {spec.id!r} registered twice "
                             f"(by {self._specs[spec.id].plugin} and {spec.plugin})")
        self._specs[spec.id] = spec

    def get(self, model_id: str) -> ModelSpec:
        if model_id in self._specs:
            return self._specs[model_id]
        close = difflib.get_close_matches(model_id, list(self._specs), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(sorted(self._specs)) or "none (is a model plugin such as vidax-wan installed?)"
        raise UserError(f"unknown model id {model_id!r}: {hint}known models: {known} (see `vidax list-models`)")

    def __iter__(self):
        return iter(sorted(self._specs.values(), key=lambda s: (s.family, s.id)))

    def __len__(self) -> int:
        return len(self._specs)
