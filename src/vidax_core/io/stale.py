"""Temporary names that say which process made them, so a later run can remove what a killed one left.

A run writes every output under a hidden temporary name and renames it into place at the end
(:mod:`vidax_core.io.outputs`); the disk offload cache is built in a temporary folder the same way
(:mod:`vidax_core.parallel.disk_chunks`). A process killed outright (SIGKILL, the OOM killer, a power cut) cannot
remove its own: its temporary names carry ``<host>-<pid>``, and :func:`sweep` removes entries whose process is
gone. Only this host's dead processes are swept: another host's pids mean nothing here, and a live process
(whatever user runs it) keeps its file.
"""

from __future__ import annotations

import os
import re
import shutil
import socket

_SAFE = re.compile(r"[^A-Za-z0-9_]")
_STAMP = re.compile(r"\.(?P<host>[A-Za-z0-9_]{1,32})-(?P<pid>\d{1,10})\.")


def host() -> str:
    """This host's name as it appears in a stamp (letters, digits and ``_``, at most 32)."""
    return (_SAFE.sub("_", socket.gethostname()) or "host")[:32]


def stamp() -> str:
    """``.<host>-<pid>.``: the part of a temporary name that says which process made it."""
    return f".{host()}-{os.getpid()}."


def owner_gone(name: str) -> bool:
    """True when ``name`` carries a stamp of this host whose process no longer runs."""
    m = _STAMP.search(name)
    if m is None or m.group("host") != host():
        return False
    pid = int(m.group("pid"))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):  # another user's live process, or not a pid at all
        return False
    return False


def sweep(folder: str, prefix: str, suffix: str = "") -> list[str]:
    """Remove the entries of ``folder`` named ``prefix...suffix`` whose stamped process is gone (files, or
    folders: a cache build); returns what was removed. Errors (a folder that vanished, no permission) are
    ignored: sweeping is housekeeping, never a reason to fail a run."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)) or not owner_gone(name[len(prefix) - 1:]):
            continue
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed
