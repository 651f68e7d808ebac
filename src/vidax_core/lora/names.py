"""An adapter's module names -> the module names of the checkpoint's tensors (the keys ``convert_checkpoint``
reads), through the family's own rename of its original names (``FamilyPlugin.lora_key_map``).

``diffusers`` names are the checkpoint's own; ``original`` names go through the family's map; ``kohya`` names are
original names with every dot turned into ``_``: which underscores were dots is found by trying them against the
checkpoint (once per name pattern, block numbers aside), so no family lists its module names twice.
"""

from __future__ import annotations

import itertools
import re
from typing import Callable, Iterable, Union

#: A rename gives one checkpoint module name, or for a module the checkpoint holds split (a fused qkv, a swapped
#: table) the pieces ``[(name, i, n)]``: the source's output rows, in order, fill the ``i``-th of ``n`` equal row
#: chunks of module ``name`` (``n = 1``: all of it).
Target = Union[str, list]
Rename = Callable[[str], Target]

_MAX_UNDERSCORES = 12


def _identity(name: str) -> str:
    return name


def renamer(layout: str, key_map: Callable[[str], Rename | None] | None) -> Rename:
    """The rename of module names in ``layout`` (``diffusers`` / ``original``) for a family."""
    fn = key_map(layout) if key_map is not None else None
    return fn or _identity


class KohyaNames:
    """Resolves ``blocks_0_self_attn_q`` to the original name whose rename is a module of ``modules``."""

    def __init__(self, modules: set[str], original: Rename) -> None:
        self.modules, self.original = modules, original
        self._masks: dict[str, tuple[bool, ...] | None] = {}

    def __call__(self, name: str) -> str | None:
        parts = name.split("_")
        pattern = re.sub(r"\d+", "#", name)
        if pattern not in self._masks:
            self._masks[pattern] = self._find(parts)
        mask = self._masks[pattern]
        if mask is None:
            return None
        return self.original(_join(parts, mask))

    def _find(self, parts: list[str]) -> tuple[bool, ...] | None:
        n = len(parts) - 1
        if n > _MAX_UNDERSCORES:
            return None
        hits = [mask for mask in itertools.product((True, False), repeat=n)
                if known(self.original(_join(parts, mask)), self.modules)]
        return hits[0] if len(hits) == 1 else None


def _join(parts: list[str], dots: Iterable[bool]) -> str:
    out = parts[0]
    for p, dot in zip(parts[1:], dots):
        out += ("." if dot else "_") + p
    return out


def known(target: Target, modules: set[str]) -> bool:
    """Every module ``target`` names is in ``modules``."""
    if isinstance(target, str):
        return target in modules
    return bool(target) and all(t[0] in modules for t in target)


def modules_of(keys: Iterable[str]) -> set[str]:
    """Module names of tensor keys (``a.b.weight`` -> ``a.b``), plus every key itself (parameters such as
    ``scale_shift_table`` are their own module)."""
    out = set()
    for k in keys:
        out.add(k)
        if "." in k:
            out.add(k.rsplit(".", 1)[0])
    return out


def resolve(layout: str, names: Iterable[str], modules: set[str],
            key_map: Callable[[str], Rename | None] | None) -> tuple[str, dict[str, str | None]]:
    """(the layout used, adapter module name -> checkpoint module name or None when it maps to none)."""
    names = list(names)
    if layout == "kohya":
        kohya = KohyaNames(modules, renamer("original", key_map))
        return layout, {n: kohya(n) for n in names}
    if layout == "plain":  # no prefix: whichever naming maps more of the modules
        best = None
        for candidate in ("diffusers", "original"):
            fn = renamer(candidate, key_map)
            mapped = {n: fn(n) if known(fn(n), modules) else None for n in names}
            hits = sum(v is not None for v in mapped.values())
            if best is None or hits > best[0]:
                best = (hits, candidate, mapped)
        return best[1], best[2]
    fn = renamer(layout, key_map)
    return layout, {n: (fn(n) if known(fn(n), modules) else None) for n in names}
