"""Every memory claim in a shipped config's comments is what ``vidax run CONFIG --dry-run`` prints.

A config comment about fitting (resident, offload, GiB, fits) must be one checkable line::

    # Dry run (OVERRIDES): ~W GiB of DiT weights + ~A GiB of activations per device -> fits N GB, not M GB.

(continued on the next ``#`` lines while it has not reached its full stop).
The test runs the dry run as a reader of the config would, with no local weights (the id's published layout that
its plugin ships), with the overrides on as many fake CPU devices as the mesh needs, and compares both figures;
"fits N GB" means weights + activations stay within N * 10^9 bytes, "not M GB" that they do not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vidax_core.testing.cli import vidax
from vidax_core.testing.devices import xla_flags

pytestmark = pytest.mark.xdist_group("config_memory")

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
ABOUT_MEMORY = re.compile(r"resident|offload|GiB|\bfits?\b", re.I)
CLAIM = re.compile(r"# Dry run \(([^)]*)\): ~([\d.]+) GiB of DiT weights \+ ~([\d.]+) GiB of activations per "
                   r"device -> (.+)\.$")


def comment_lines(config: Path) -> list[str]:
    """The config's comment lines, a ``# Dry run`` claim joined with the ``#`` lines continuing it (up to its ``.``)."""
    out: list[str] = []
    for line in config.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line.startswith("#"):
            continue
        if out and out[-1].startswith("# Dry run") and not out[-1].endswith("."):
            out[-1] += " " + line.lstrip("# ")
        else:
            out.append(line)
    return out


def claims(config: Path) -> list[tuple[list[str], float, float, list[str]]]:
    """The config's claim lines; any other comment line about memory fails here (it cannot be checked)."""
    out = []
    for line in comment_lines(config):
        if not ABOUT_MEMORY.search(line):
            continue
        if "docs/models/" in line and "GiB" not in line:
            continue  # a pointer to the family page, no claim
        m = CLAIM.match(line)
        assert m, f"{config.name}: a memory comment the dry run cannot check (write it as '{CLAIM.pattern}'): {line}"
        out.append((m[1].split(), float(m[2]), float(m[3]), [c.strip() for c in m[4].split(",")]))
    return out


CASES = [(c, i) for c in CONFIGS for i in range(len(claims(c)))]


def test_the_claims_are_found():
    names = {c.name for c, _ in CASES}
    assert {"wan21_14b_720p.yaml", "cosmos_predict25_14b_720p.yaml"} <= names


def _gib(out: str, prefix: str) -> float:
    m = re.search(rf"^{prefix} ~?([\d.]+) (GiB|MiB)", out, re.M)
    assert m, f"no '{prefix}' line in the dry run:\n{out[-2000:]}"
    return float(m[1]) / (1024 if m[2] == "MiB" else 1)


@pytest.mark.parametrize("config,index", CASES, ids=[f"{c.stem}-{i}" for c, i in CASES])
def test_config_memory_comment_is_the_dry_run(config, index, tmp_path):
    overrides, weights, activations, fits = claims(config)[index]
    mesh = {k: 1 for k in ("dp", "tp", "sp")}
    for o in overrides:
        key, _, value = o.partition("=")
        if key.startswith("parallel.") and value.isdigit():
            mesh[key.split(".")[1]] = int(value)
    devices = mesh["dp"] * mesh["tp"] * mesh["sp"]
    if "checkpoint: path/to/" in config.read_text():  # an unpublished model's placeholder folder: its id's layout
        overrides = [*overrides, "model.checkpoint=null"]
    proc = vidax("run", str(config), *overrides, "--dry-run", cwd=tmp_path,
                 env={"XLA_FLAGS": xla_flags(devices), "HF_HUB_CACHE": str(tmp_path / "hub")}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "published layout, no weights" in out, out[-2000:]
    assert (_gib(out, "per device:"), _gib(out, "activations:")) == (weights, activations), out[-2000:]
    total = (weights + activations) * 2**30
    for claim in fits:
        m = re.fullmatch(r"(fits|not) (\d+) GB", claim)
        assert m, f"{config.name}: cannot read '{claim}' (write 'fits N GB' or 'not N GB')"
        assert (total <= int(m[2]) * 1e9) == (m[1] == "fits"), (config.name, claim, total / 2**30)
