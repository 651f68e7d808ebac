"""Safe output files: checked before the run starts, written to a temporary file and renamed into place.

An interrupted or failed run therefore never leaves a partial file, and an existing output is only replaced when
``output.overwrite`` is true. The temporary name is hidden and stamped with the writing process
(``.NAME.<host>-<pid>.XXXXXXXX.partial.EXT``, :mod:`vidax_core.io.stale`): a process killed outright cannot remove
its own, so the next write of the same output removes those whose process is gone (never a live run's).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io import stale


def check_writable(paths: Sequence[str | None], overwrite: bool) -> None:
    """Fail early (before loading anything) if an output exists or its folder cannot be written.

    Nothing is created: a missing folder is checked through its nearest existing ancestor (it is made only when
    the output is written), so a run that fails later leaves no empty folders behind.
    """
    for path in paths:
        if not path:
            continue
        if os.path.isdir(path):
            raise UserError(f"output path {path} is a folder: give a file name")
        if os.path.lexists(path) and not os.path.isfile(path):
            raise UserError(f"output path {path} exists and is not a regular file: choose another name")
        if os.path.exists(path) and not overwrite:
            raise UserError(f"output {path} already exists: pass output.overwrite=true or choose another output.path")
        folder = os.path.dirname(os.path.abspath(path))
        existing = folder
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise UserError(f"cannot write to output folder {folder}: {existing} is a file, not a folder")
        try:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=".vidax-probe-"):
                pass
        except OSError as exc:
            raise UserError(f"cannot write to output folder {folder}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    base, ext = os.path.splitext(os.path.basename(path))
    # short enough beside any legal name: NAME_MAX is 255 bytes, mkstemp adds 8 random characters
    base, ext = os.fsdecode(os.fsencode(base)[:120]), os.fsdecode(os.fsencode(ext)[:16])
    stale.sweep(folder, f".{base}.", f".partial{ext}")  # what killed runs left of this output
    fd, tmp = tempfile.mkstemp(prefix=f".{base}{stale.stamp()}", suffix=f".partial{ext}", dir=folder)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs get the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: str, writer: Callable[[str], Any]) -> None:
    with atomic_path(path) as tmp:
        writer(tmp)


def save_npy(path: str, array: np.ndarray) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(array))

    write_atomic(path, write)


def save_json(path: str, data: Any) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")

    write_atomic(path, write)
