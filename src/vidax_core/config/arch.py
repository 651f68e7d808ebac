"""Frozen architecture configs built from a checkpoint's config.json.

Every model config is a frozen dataclass whose field names are the reference's config.json names; the file also
holds bookkeeping keys (``_class_name``, ``_diffusers_version``, ``architectures``...) that are not fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


def from_config_dict(cls: type[T], config: Mapping[str, Any], **overrides: Any) -> T:
    """``cls(**fields)`` from ``config`` updated with ``overrides``; keys that are not fields of ``cls`` are ignored."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in {**dict(config), **overrides}.items() if k in names})
