"""Many hosts: start ``jax.distributed`` before any device is touched, so the mesh spans every process.

The coordinator address, process count and process id come from the ``distributed`` config keys, else from the
standard environment variables ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``. With
none of them set the run is single-process. On CPU the cross-process collectives use gloo.

Every process runs the same program on the same config (SPMD); each supplies the shards of its own devices
(:func:`vidax_core.parallel.sharding.put`) and only process 0 writes outputs (:func:`is_writer`).
"""

from __future__ import annotations

import os

import jax

from vidax_core.errors import UserError

_started = False


def settings(cfg) -> tuple[str | None, int | None, int | None]:
    d = getattr(cfg, "distributed", None)
    addr = getattr(d, "coordinator_address", None) or os.environ.get("JAX_COORDINATOR_ADDRESS")
    n = getattr(d, "num_processes", None)
    pid = getattr(d, "process_id", None)
    try:
        n = n if n is not None else (int(os.environ["JAX_NUM_PROCESSES"])
                                     if "JAX_NUM_PROCESSES" in os.environ else None)
        pid = pid if pid is not None else (int(os.environ["JAX_PROCESS_ID"])
                                           if "JAX_PROCESS_ID" in os.environ else None)
    except ValueError as exc:
        raise UserError(f"JAX_NUM_PROCESSES / JAX_PROCESS_ID must be integers: {exc}") from exc
    return addr, n, pid


def initialize(cfg) -> bool:
    """Start jax.distributed when configured; True when this run spans several processes."""
    global _started
    addr, n, pid = settings(cfg)
    if _started:
        return jax.process_count() > 1
    if addr is None:
        if n not in (None, 1):
            raise UserError(f"distributed.num_processes={n} needs distributed.coordinator_address (host:port)")
        return False
    if n is None or pid is None:
        raise UserError("distributed.coordinator_address is set: also set distributed.num_processes and "
                        "distributed.process_id (or JAX_NUM_PROCESSES / JAX_PROCESS_ID)")
    if not 0 <= pid < n:
        raise UserError(f"distributed.process_id={pid} must be in [0, {n}): change distributed.process_id")
    # CPU collectives across processes (harmless on GPU/TPU, whose collectives are native).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=addr, num_processes=n, process_id=pid)
    _started = True
    return True


def is_writer() -> bool:
    """Only process 0 writes files."""
    return jax.process_index() == 0
