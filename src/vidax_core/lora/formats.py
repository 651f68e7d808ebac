"""An adapter file's layout, recognised and normalised into one :class:`Record` per adapted module.

Layouts (the prefix of every key says which):

* ``diffusers`` – ``transformer.<module>.lora_A.weight`` / ``lora_B.weight`` (peft; diffusers' ``save_lora_weights``),
  ``lora_B.bias`` for a bias delta, the peft ``LoraConfig`` (``lora_alpha``, patterns) in the file's metadata;
  ``base_model.model.`` (a raw peft save) reads the same way;
* ``original`` – ``diffusion_model.<module>`` in the family's original (ComfyUI) names: ``lora_down`` / ``lora_up``
  (or ``lora_A`` / ``lora_B``) with ``.alpha``, ``.diff_b`` bias deltas and ``.diff`` full weight deltas;
* ``kohya`` – ``lora_unet_<module with _ for .>.lora_down.weight`` / ``lora_up.weight`` / ``.alpha`` (musubi-tuner):
  the module is the original name, its dots found against the checkpoint (:mod:`.names`);
* ``plain`` – no prefix: the module names decide between the diffusers and the original names.

A module's delta is ``factor * up @ down`` (+ ``diff``) with ``factor = alpha / rank`` when the file gives an alpha,
else the peft config's ``lora_alpha / rank`` (``/ sqrt(rank)`` with ``use_rslora``), else 1, as diffusers folds it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vidax_core.lora.files import AdapterFile

PREFIXES = (("diffusers", "transformer."), ("diffusers", "base_model.model."), ("original", "diffusion_model."),
            ("kohya", "lora_unet_"))
TEXT_PREFIXES = ("text_encoder.", "text_encoder_2.", "lora_te_", "lora_te1_", "lora_te2_", "te.")

# key suffix -> the part it holds
SUFFIXES = (
    (".lora_A.weight", "down"), (".lora_down.weight", "down"),
    (".lora_B.weight", "up"), (".lora_up.weight", "up"),
    (".lora_B.bias", "up_bias"),
    (".alpha", "alpha"), (".diff_b", "diff_b"), (".diff", "diff"),
    (".dora_scale", "dora"), (".lora_magnitude_vector.weight", "dora"), (".lora_magnitude_vector", "dora"),
)


@dataclass
class Record:
    """What a file holds for one module (``name`` in the file's own naming): arrays by part, their source keys."""

    name: str
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        down = self.parts.get("down")
        return int(down.shape[0]) if down is not None and down.ndim >= 1 else None

    @property
    def alpha(self) -> float | None:
        a = self.parts.get("alpha")
        return float(np.asarray(a, np.float64).reshape(-1)[0]) if a is not None and np.size(a) == 1 else None


@dataclass
class Adapter:
    """A normalised adapter: its layout, its records by module name and the problems found reading it."""

    path: str
    layout: str
    records: dict[str, Record]
    problems: list[str]
    peft: dict[str, Any] | None = None

    def factor(self, rec: Record) -> float:
        """The multiplier of ``up @ down`` (and of a peft ``lora_B.bias``) for one module at scale 1."""
        r = rec.rank
        if not r:
            return 1.0
        if rec.alpha is not None:
            return rec.alpha / r
        cfg = self.peft
        if not cfg:
            return 1.0
        alpha = float(cfg.get("lora_alpha", cfg.get("r", r)) or r)
        for pattern, value in (cfg.get("alpha_pattern") or {}).items():
            if re.match(rf"(.*\.)?({pattern})$", rec.name):
                alpha = float(value)
                break
        return alpha / (math.sqrt(r) if cfg.get("use_rslora") else r)


def _split(key: str) -> tuple[str, str] | None:
    if key.endswith(".diff_m") and len(key) > 7:  # lightx2v: the full delta of the module's ``modulation`` table
        return key[:-7] + ".modulation", "diff"
    for suffix, part in SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)], part
    return None


def layout_of(keys: list[str]) -> tuple[str | None, str, list[str]]:
    """(layout, prefix, keys outside it): the layout most keys' prefix names (``plain`` when none has one)."""
    counts: dict[tuple[str, str], int] = {}
    for k in keys:
        for layout, prefix in PREFIXES:
            if k.startswith(prefix):
                counts[(layout, prefix)] = counts.get((layout, prefix), 0) + 1
                break
    if not counts:
        return "plain", "", []
    (layout, prefix), _ = max(counts.items(), key=lambda kv: kv[1])
    return layout, prefix, [k for k in keys if not k.startswith(prefix)]


def normalise(f: AdapterFile) -> Adapter:
    """The records of ``f`` and every problem of its keys (not yet of its modules' targets: :mod:`.check`)."""
    keys = list(f.tensors)
    layout, prefix, stray = layout_of(keys)
    problems: list[str] = []
    text = [k for k in stray if k.startswith(TEXT_PREFIXES)]
    if text:
        problems.append(f"{len(text)} text-encoder keys (e.g. {text[0]}): only denoiser adapters are supported")
    others = [k for k in stray if k not in text]
    if others:
        problems.append(f"{len(others)} keys outside its {layout} layout's {prefix!r} prefix "
                        f"(e.g. {', '.join(others[:3])})")
    records: dict[str, Record] = {}
    unknown: list[str] = []
    for k in keys:
        if not k.startswith(prefix) or k in stray:
            continue
        hit = _split(k[len(prefix):])
        if hit is None:
            unknown.append(k)
            continue
        name, part = hit
        rec = records.setdefault(name, Record(name))
        if part in rec.parts:
            problems.append(f"{k} and {rec.keys[part]} both give the {part} of {name}")
            continue
        rec.parts[part] = f.tensors[k]
        rec.keys[part] = k
    if unknown:
        problems.append(f"{len(unknown)} keys that are no LoRA part (lora_A/B, lora_down/up, alpha, diff, diff_b): "
                        + ", ".join(unknown[:4]) + (", ..." if len(unknown) > 4 else ""))
    return Adapter(f.path, layout or "plain", records, problems, f.peft_config() if layout != "original" else None)
