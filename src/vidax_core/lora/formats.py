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
else the peft config's ``lora_alpha / rank`` (``/ sqrt(rank)`` with ``use_rslora``; ``alpha_pattern`` per module;
peft's default alpha 8 when the config names none; 0 scales the delta by 0), else 1, as diffusers folds it. The peft
config is checked when it is read: a non-number, NaN or infinite alpha or a pattern that is no regular expression is
one line naming the metadata key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vidax_core.errors import UserError
from vidax_core.lora.files import METADATA_KEY, AdapterFile

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


PEFT_DEFAULT_ALPHA = 8.0  # peft's LoraConfig default, what diffusers uses when the saved config names no lora_alpha


@dataclass(frozen=True)
class Peft:
    """The checked peft ``LoraConfig`` fields that set the factor: the alpha, the per-module alphas (compiled
    patterns, first match wins, as peft's ``get_pattern_key``) and rsLoRA."""

    alpha: float = PEFT_DEFAULT_ALPHA
    patterns: tuple[tuple[re.Pattern, float], ...] = ()
    rslora: bool = False

    @classmethod
    def read(cls, cfg: Any, where: str) -> "Peft":
        if not isinstance(cfg, dict):
            raise UserError(f"{where}: its peft config is a {type(cfg).__name__}, not a mapping: re-save the adapter")
        alpha = _alpha(cfg.get("lora_alpha", PEFT_DEFAULT_ALPHA), f"{where}: lora_alpha")
        rslora = cfg.get("use_rslora", False)
        if not isinstance(rslora, bool):
            raise UserError(f"{where}: use_rslora must be true/false, got {_short(rslora)}")
        pats = cfg.get("alpha_pattern") or {}
        if not isinstance(pats, dict):
            raise UserError(f"{where}: alpha_pattern must map module patterns to alphas, got {_short(pats)}")
        patterns = []
        for pattern, value in pats.items():
            key = f"{where}: alpha_pattern[{_short(pattern)}]"
            try:
                re.compile(pattern)  # its own errors, at positions of its own text
                patterns.append((re.compile(rf"(.*\.)?({pattern})$"), _alpha(value, key)))
            except (re.error, RecursionError, OverflowError) as exc:
                raise UserError(f"{key} is not a regular expression ({' '.join(str(exc).split())[:80]})") from None
        return cls(alpha, tuple(patterns), rslora)

    def factor(self, name: str, rank: int) -> float:
        alpha = next((a for pattern, a in self.patterns if pattern.match(name)), self.alpha)
        return alpha / (math.sqrt(rank) if self.rslora else rank)


def _alpha(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key} must be a number, got {_short(value)}: re-save the adapter")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise UserError(f"{key} must be a finite number, got {_short(value)}: re-save the adapter")
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class Adapter:
    """A normalised adapter: its layout, its records by module name and the problems found reading it."""

    path: str
    layout: str
    records: dict[str, Record]
    problems: list[str]
    peft: Peft | None = None

    def factor(self, rec: Record) -> float:
        """The multiplier of ``up @ down`` (and of a peft ``lora_B.bias``) for one module at scale 1."""
        r = rec.rank
        if not r:
            return 1.0
        if rec.alpha is not None:
            return rec.alpha / r
        return 1.0 if self.peft is None else self.peft.factor(rec.name, r)


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
    raw = f.peft_config() if layout != "original" else None
    peft = None if raw is None else Peft.read(raw, f"{f.path}: metadata {METADATA_KEY}")
    return Adapter(f.path, layout or "plain", records, problems, peft)
