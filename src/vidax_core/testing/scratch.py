"""Scratch folders for the tiny test models' tokenizer files, removed when the process exits.

A tiny pipeline's tokenizer is written to a folder and loaded from it; the tokenizer object keeps the folder's path
(``save_pretrained`` copies its vocabulary file from there), so the folder must live as long as the process. Every
folder is made under one per-process root that an exit handler removes: a suite run no longer leaves a few hundred
``vidax-*-tok-*`` folders in the system's temporary folder."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_root: str | None = None


def scratch_dir(prefix: str) -> str:
    """A new empty folder named ``prefix...`` under this process's scratch root (made on first use)."""
    global _root
    if _root is None or not os.path.isdir(_root):
        _root = tempfile.mkdtemp(prefix=f"vidax-scratch-{os.getpid()}-")
        atexit.register(_remove, _root, os.getpid())
    return tempfile.mkdtemp(prefix=prefix, dir=_root)


def _remove(root: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child that exits normally leaves its parent's folders alone
        shutil.rmtree(root, ignore_errors=True)
