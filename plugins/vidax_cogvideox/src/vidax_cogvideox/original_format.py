"""The original SAT release of CogVideoX (``transformer/1/mp_rank_00_model_states.pt``, ``transformer/latest``,
``vae/3d-vae.pt``) is out of scope: such a folder gets one line pointing at the diffusers-layout repo. A SAT folder
has a ``transformer/`` folder, so the core may take it for diffusers layout: ``check_checkpoint`` refuses it
before reading any config, ``open_checkpoint`` when the core asks the plugin."""

from __future__ import annotations

import os
from typing import Any

from vidax_core.errors import UserError

_SAT_FILES = ("mp_rank_00_model_states.pt", "3d-vae.pt")


def is_sat_folder(path: str | os.PathLike) -> bool:
    """True when ``path`` holds SAT checkpoint files (up to three levels deep)."""
    root = os.fspath(path)
    if not os.path.isdir(root):
        return False
    base = root.rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.count(os.sep) - base >= 3:
            dirnames[:] = []
        if any(f in _SAT_FILES for f in filenames):
            return True
    return False


def sat_message(spec: Any, path: str | os.PathLike) -> str:
    repo = spec.hub_repo or "the THUDM/CogVideoX* diffusers repo"
    return (f"{os.fspath(path)} is an original SAT checkpoint of CogVideoX, which vidax does not read: download "
            f"the diffusers-layout repo {repo} (model_index.json, transformer/, vae/, text_encoder/, tokenizer/, "
            "scheduler/) instead")


def refuse_sat(spec: Any, path: str | os.PathLike) -> None:
    """Raise the one-line error for a SAT folder; return quietly for anything else."""
    if is_sat_folder(path):
        raise UserError(sat_message(spec, path))
