"""Regenerate a tiny checkpoint a plugin ships (``assets/<name>`` beside the package, served as ``builtin:<name>``).

A plugin's ``scripts/make_tiny_asset.py`` states only how its family writes the folder; this finds the folder the
core's ``packaged_checkpoint`` serves, writes it afresh (the old one removed first, so no stale file survives) and
names it. Needs what the writer needs (the ``test`` extra for a diffusers ``save_pretrained``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Callable


def asset_folder(package: str, name: str = "tiny-random") -> str:
    """``<package dir>/assets/<name>`` of an importable package (its source tree under an editable install)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise ModuleNotFoundError(f"package {package!r} is not importable: install the plugin (pip install -e)")
    return os.path.join(os.path.dirname(spec.origin), "assets", name)


def writable_asset(package: str, dst: str | os.PathLike, name: str = "tiny-random") -> str:
    """A copy of a shipped tiny checkpoint at ``dst`` that a test may damage (the package's own stays intact)."""
    shutil.copytree(asset_folder(package, name), dst)
    return dst


def regenerate_asset(package: str, write: Callable[[str], object], name: str = "tiny-random") -> str:
    """Remove and rewrite ``assets/<name>`` of ``package`` with ``write(folder)``; prints and returns the folder."""
    dest = asset_folder(package, name)
    shutil.rmtree(dest, ignore_errors=True)
    write(dest)
    print(f"wrote {dest}")
    return dest
