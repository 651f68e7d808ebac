"""A call's arguments as changes to a loaded model's base config: the Python API's keywords (``pipe(seed=3)``)
and a ``--prompts`` line's keys speak the same names, read from the schema's scopes (:mod:`.scope`).

:func:`call_changes` turns the arguments into the nested changes a loaded model merges over its base config
(``LoadedModel.call_config``); every value is first made what a YAML file holds (:func:`plain`), so the later
checks see the values a config file gives. A key the load fixes, or no key at all, is one :class:`UserError`.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

import numpy as np

from vidax_core.config import RunConfig, scope
from vidax_core.config.parse import short_repr
from vidax_core.errors import UserError

SAMPLING_KEYS, CALL_ARGUMENTS = scope.SAMPLING_KEYS, scope.CALL_ARGUMENTS
TOP_KEYS = tuple(k for k in scope.call_keys() if k != "sampling")
LOAD_ONLY = scope.load_only_hints()  # a load's key a call may not change -> the override that changes it at load
NO_OUTPUT = {"path": None, "save_latents": None, "save_frames": None, "save_audio": None, "metrics": None}
PLAIN = (str, int, float, bool, type(None))


def call_changes(base: RunConfig, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The changes ``kwargs`` (call argument -> value) make to ``base``: ``sampling.*`` keys by their short names,
    ``options`` / ``output`` / ``vae`` merged over the base's, no output file unless the call names one."""
    changes: dict[str, Any] = {"output": dict(NO_OUTPUT)}
    for key, value in kwargs.items():
        value = plain(value, key)
        if key in SAMPLING_KEYS:
            changes.setdefault("sampling", {})[key] = value
        elif key == "options":
            if not isinstance(value, Mapping):
                raise UserError(f"options must be a mapping of the model's options, got {type(value).__name__}")
            changes["options"] = {**dict(base.options), **dict(value)}
        elif key in ("output", "vae"):
            if not isinstance(value, Mapping):
                raise UserError(f"{key} must be a mapping of {key}.* keys, got {type(value).__name__}")
            changes[key] = {**(changes.get(key) or {}), **dict(value)}
        elif key in TOP_KEYS:
            changes[key] = value
        elif key == "lora" and base.lora_mode == "unfused":  # the factors are step inputs
            changes["lora"] = [] if value is None else value
        elif key == "lora":
            raise UserError("lora cannot change between calls of a pipe loaded with lora_mode=fused (the "
                            "adapters are fused into its weights): load with lora_mode=unfused to pass lora= "
                            "per call, or load again with lora=[{path: …}]")
        elif key in LOAD_ONLY:
            raise UserError(f"{key} cannot change between calls of a loaded pipe (it is fixed when the model "
                            f"loads): load again with {LOAD_ONLY[key]} to change it")
        else:
            close = difflib.get_close_matches(key, CALL_ARGUMENTS, n=1)
            hint = f" — did you mean {close[0]}?" if close else f" (takes: {', '.join(CALL_ARGUMENTS)})"
            raise UserError(f"unknown argument {key!r}{hint}")
    if "output" in kwargs and "fps" not in kwargs["output"]:
        changes["output"].setdefault("fps", base.output.fps)
    return changes


def plain(value: Any, key: str, depth: int = 0) -> Any:
    """A call argument as what a YAML config holds (text, numbers, true/false, null, lists, mappings with text
    keys; a numpy scalar becomes its Python number), so every later check sees the values a config file gives;
    anything else (a set, bytes, an object) is refused by name."""
    if isinstance(value, PLAIN):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if not key.isprintable():  # a name with a newline or a control character: named by its repr, on one line
        key = short_repr(key)
    if depth > 16:
        raise UserError(f"{key} is nested too deeply to be a call argument")
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{key}[{n}]", depth + 1) for n, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UserError(f"{key} has a key {short_repr(k)} that is not text: name its entries with strings")
            out[k] = plain(v, f"{key}.{k}" if k.isprintable() else f"{key}[{short_repr(k)}]", depth + 1)
        return out
    raise UserError(f"{key} must be text, a number, true/false, null, a list or a mapping (what a config file "
                    f"holds), got {type(value).__name__} {short_repr(value)}")
