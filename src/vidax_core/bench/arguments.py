"""``vidax bench``'s own arguments checked before any work, as a run's config is: each mistake one ``error:`` line
naming the flag and what to give (a number out of range, a name with a path in it, an output folder that is a
file, an attention backend that does not exist), never an internal error, a MemoryError or a model built at its
full published depth by accident.

The ``key=value`` overrides are the run's config and are checked by the config code; this module checks the
flags. ``--random-blocks`` is checked against the model's block counts where they are known
(:func:`check_random_blocks`, from :mod:`vidax_core.bench.random_dit`).
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Mapping

from vidax_core.errors import UserError

MAX_BATCH = 64  # model batch of a --random-dit call (2 = the CFG branches; 100000 was a MemoryError)
MAX_BLOCKS = 256
MAX_REPEATS = 10_000
MAX_FRAMES = 1_025
MAX_SIZE = 4_096
MAX_HOST_DEVICES = 1_024
ALL = "all"
DEFAULT_RANDOM_BLOCKS = 2  # --random-dit keeps this many blocks a group unless told (never the full depth unasked)


def random_blocks(text: str) -> int | str:
    """``--random-blocks``: a positive count or ``all`` (argparse type)."""
    if text.strip().lower() == ALL:
        return ALL
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number of blocks or 'all', got {text!r}") from None
    if not 1 <= value <= MAX_BLOCKS:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_BLOCKS} blocks, or 'all', got {value}")
    return value


def _ints(flag: str, text: Any, low: int, high: int) -> list[int]:
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise UserError(f"{flag} must be a comma list of whole numbers, got {str(text)!r}") from None
    bad = [v for v in values if not low <= v <= high]
    if bad:
        raise UserError(f"{flag} values must be from {low} to {high}, got {bad[0]}")
    return values


def _number(flag: str, value: Any, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise UserError(f"{flag} must be from {low} to {high}, got {value}")


def check_name(name: str | None) -> None:
    """``--name``: the stem of the report files, a plain file name (no folder: that is ``--out``)."""
    if name is None:
        return
    if not name.strip() or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise UserError(f"--name must be a plain file name for the report (NAME.json, NAME.md), got {name!r}: put "
                        "the folder in --out")
    if len(name.encode()) > 200:
        raise UserError(f"--name is {len(name.encode())} bytes long; a file name may have at most 200 here")


def check_folder(flag: str, path: str, *, empty: bool = False) -> None:
    """``path`` is (or can be made) a folder this user writes, without creating anything; ``empty``: if it
    exists it holds nothing (a written checkpoint never mixes with other files)."""
    if not path or not path.strip():
        raise UserError(f"{flag} needs a folder, got an empty path")
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.lexists(full) and not os.path.isdir(full):
        raise UserError(f"{flag} {path} exists and is not a folder: give a folder")
    if os.path.isdir(full):
        if empty and os.listdir(full):
            raise UserError(f"{flag} {path} is not empty: give a new or empty folder")
        if not os.access(full, os.W_OK | os.X_OK):
            raise UserError(f"{flag} {path}: this user cannot write there")
        return
    parent = os.path.dirname(full)
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UserError(f"{flag} {path} cannot be made: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path} cannot be made: this user cannot write in {parent}")


def check_attention(text: str) -> list[str]:
    from vidax_core.attention.backends import ATTENTION_BACKENDS

    names = [b.strip() for b in str(text).split(",") if b.strip()]
    if not names:
        raise UserError(f"--attention needs at least one backend of {', '.join(ATTENTION_BACKENDS)}")
    bad = [b for b in names if b not in ATTENTION_BACKENDS]
    if bad:
        raise UserError(f"--attention {bad[0]!r} is not an attention backend: use {', '.join(ATTENTION_BACKENDS)}")
    return names


def check_args(args: argparse.Namespace) -> None:
    """Every flag of ``args`` (see the module docstring)."""
    check_name(args.name)
    if args.write_random_checkpoint:
        model_id, out = args.write_random_checkpoint
        check_folder("--write-random-checkpoint OUT", out, empty=True)
        _number("--blocks", args.blocks, 1, MAX_BLOCKS)
        return
    check_folder("--out", args.out)
    _number("--host-devices", args.host_devices, 1, MAX_HOST_DEVICES)
    _number("--repeats", args.repeats, 1, MAX_REPEATS)
    if args.random_dit:
        _number("--batch", args.batch, 1, MAX_BATCH)
        check_attention(args.attention)
        if args.offload:
            _ints("--offload", args.offload, 1, MAX_BLOCKS)
    elif args.attention != "auto" or args.random_blocks is not None:
        raise UserError("--attention and --random-blocks belong to --random-dit (a run's backend is the config's "
                        "attention.backend=...)")
    if args.dit_only:
        _number("--blocks", args.blocks, 1, MAX_BLOCKS)
        _ints("--compile-blocks", args.compile_blocks, 1, MAX_BLOCKS)
        _ints("--vae-frames", args.vae_frames, 1, MAX_FRAMES)
        _number("--vae-size", args.vae_size, 8, MAX_SIZE)


def check_random_blocks(blocks: int | str | None, groups: Mapping[str, int], model_id: str) -> int | None:
    """``--random-blocks`` against the model's stacked groups: the blocks kept per group (None: every one, asked
    for with ``all``; not given: :data:`DEFAULT_RANDOM_BLOCKS`). More blocks than the largest group has is refused
    rather than read as "all": a typo must not build a published DiT at its full depth."""
    if blocks == ALL:
        return None
    if blocks is None:
        blocks = DEFAULT_RANDOM_BLOCKS
    most = max(groups.values(), default=0)
    if blocks is not None and most and blocks > most:
        counts = ", ".join(f"{g}: {n}" for g, n in groups.items())
        raise UserError(f"--random-blocks {blocks}: {model_id} has at most {most} blocks in a group ({counts}); give "
                        f"at most {most}, or --random-blocks all for the full depth")
    return blocks
