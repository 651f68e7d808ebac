"""Block sizes of the splash attention kernel, chosen per (chip, kind of mask, sequence lengths, head_dim, dtype)
from a table that measurement fills (``benchmarks/splash_tune.py`` writes one; ``splash_blocks.json`` beside this
module is the one shipped).

A table is JSON: ``{"entries": [{chip, kind, q_len, kv_len, head_dim, dtype, block_q, block_kv, block_kv_compute,
...}], "defaults": {kind: {block_q, block_kv, block_kv_compute}}}``. ``chip`` is the device kind JAX reports
(``"TPU v5 lite"`` on a v5e), ``kind`` is ``dense`` (plain, key-padded, causal or segment-masked attention), ``nabla``
(NABLA's block-sparse mask, tiles of a few mask blocks) or ``neighborhood`` (3-D windows on a brick layout; an
entry may pin its ``brick``, [t, h, w] tokens, else the kernel picks one of ``block_q`` tokens at most).
:func:`lookup` takes the entries of this chip, kind and head_dim (else the nearest head_dim, else the defaults) and
returns the one nearest in log sequence length, preferring the same dtype. Other fields of an entry (measured times)
are kept for the reader. ``VIDAX_SPLASH_BLOCKS=FILE`` replaces the shipped table (the tuning run uses it).
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).with_name("splash_blocks.json")
ENV = "VIDAX_SPLASH_BLOCKS"
KINDS = ("dense", "nabla", "neighborhood")
FALLBACK = {"dense": (512, 512, 512), "nabla": (256, 128, 128), "neighborhood": (512, 512, 512)}


@dataclass(frozen=True)
class Blocks:
    """One kernel configuration: query rows per tile, keys per tile, keys per inner compute step."""

    block_q: int
    block_kv: int
    block_kv_compute: int
    brick: tuple[int, int, int] | None = None  # neighbourhood kind: the (t, h, w) token brick of a tile

    def __str__(self) -> str:
        brick = "" if self.brick is None else " brick " + "x".join(map(str, self.brick))
        return f"{self.block_q}x{self.block_kv}/{self.block_kv_compute}{brick}"

    def check(self) -> None:
        if self.block_q < 8 or self.block_q % 8:
            raise ValueError(f"splash block_q must be a positive multiple of 8, got {self.block_q}")
        if self.block_kv_compute < 128 or self.block_kv_compute % 128 or self.block_kv % self.block_kv_compute:
            raise ValueError(f"splash block_kv_compute must be a multiple of 128 dividing block_kv; got {self}")


def _blocks(row: dict[str, Any]) -> Blocks:
    brick = tuple(int(x) for x in row["brick"]) if row.get("brick") else None
    b = Blocks(int(row["block_q"]), int(row["block_kv"]), int(row.get("block_kv_compute", row["block_kv"])),
               brick)  # type: ignore[arg-type]
    b.check()
    return b


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> dict[str, Any]:
    """The table at ``path`` (default: ``$VIDAX_SPLASH_BLOCKS``, else the shipped one), checked."""
    path = path or os.environ.get(ENV) or str(SHIPPED)
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"splash block table {path}: {e}") from e
    for row in table.get("entries", []):
        if row.get("kind") not in KINDS:
            raise ValueError(f"splash block table {path}: entry kind {row.get('kind')!r} is not one of {KINDS}")
        _blocks(row)
    for kind, row in table.get("defaults", {}).items():
        if kind not in KINDS:
            raise ValueError(f"splash block table {path}: default kind {kind!r} is not one of {KINDS}")
        _blocks(row)
    return table


def chip() -> str:
    """The device kind of the default device (``"cpu"`` on a host without an accelerator)."""
    import jax

    return str(jax.devices()[0].device_kind)


def lookup(kind: str, q_len: int, kv_len: int, head_dim: int, dtype: Any, *, device_kind: str | None = None,
           table: dict[str, Any] | None = None) -> tuple[Blocks, str]:
    """(blocks, where they came from) for one call; ``where`` is ``"table"`` (a measured entry), ``"default"`` (the
    table's default for the kind) or ``"built-in"``."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")
    table = load() if table is None else table
    device_kind = chip() if device_kind is None else device_kind
    dtype = str(getattr(dtype, "name", dtype))
    rows = [r for r in table.get("entries", []) if r["kind"] == kind and r.get("chip") == device_kind]
    if rows:
        dims = sorted({int(r["head_dim"]) for r in rows}, key=lambda d: (abs(d - head_dim), d))
        rows = [r for r in rows if int(r["head_dim"]) == dims[0]]

        def distance(r: dict[str, Any]) -> tuple[float, int]:
            far = abs(math.log(max(q_len, 1) / max(int(r["q_len"]), 1)))
            far += abs(math.log(max(kv_len, 1) / max(int(r["kv_len"]), 1)))
            return far, 0 if r.get("dtype") == dtype else 1

        return _blocks(min(rows, key=distance)), "table"
    if kind in table.get("defaults", {}):
        return _blocks(table["defaults"][kind]), "default"
    return Blocks(*FALLBACK[kind]), "built-in"
