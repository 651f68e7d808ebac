"""The (dp, tp, sp) device mesh and the divisibility rules a run must satisfy before any weight is loaded.

* ``dp`` shards the batch: with classifier-free guidance the batch is 2 (conditional, unconditional), so dp=2 runs
  the two halves on different devices.
* ``tp`` shards weights Megatron-style (attention heads, FFN hidden width).
* ``sp`` shards the video tokens (Ulysses: an all-to-all swaps tokens for heads around self-attention).

``dp: null`` means "every device not used by tp and sp": ``devices / (tp * sp)``.
Mesh axis order is (dp, sp, tp): tp is innermost, so tensor-parallel peers are neighbouring devices (the fastest
links on a GPU box or a TPU slice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

from vidax_core.errors import UserError

AXES = ("dp", "sp", "tp")


@dataclass(frozen=True)
class MeshPlan:
    dp: int
    tp: int
    sp: int

    @property
    def size(self) -> int:
        return self.dp * self.tp * self.sp


def plan_mesh(
    parallel,
    *,
    n_devices: int,
    heads: int | None,
    video_tokens: int | None,
    batch: int,
    block_groups: dict[str, int] | None = None,
    offload=None,
    sp_splits_heads: bool = True,
) -> MeshPlan:
    """Resolve ``dp: null`` and check every divisibility rule; raise :class:`UserError` naming the key to change.

    ``heads``: attention heads of the DiT; ``video_tokens``: tokens of the patchified latent video; ``batch``: the
    model batch (2 with classifier-free guidance); ``block_groups``: {group name: number of stacked blocks}, checked
    against ``offload.chunk_size`` when offload is enabled; ``sp_splits_heads``: the denoiser's sequence-parallel
    attention moves heads between the sp shards (Ulysses), so ``sp`` must divide the heads per tp shard too
    (:mod:`vidax_core.attention.kinds`; linear attention exchanges no heads).
    """
    tp, sp = int(parallel.tp), int(parallel.sp)
    if tp * sp > n_devices:
        raise UserError(
            f"parallel.tp={tp} x parallel.sp={sp} needs {tp * sp} devices, only {n_devices} are visible: "
            f"lower parallel.tp or parallel.sp"
        )
    if parallel.dp is None:
        if n_devices % (tp * sp):
            raise UserError(
                f"{n_devices} devices do not split into groups of parallel.tp x parallel.sp = {tp * sp}: "
                f"set parallel.dp explicitly or change parallel.tp/parallel.sp"
            )
        dp = n_devices // (tp * sp)
    else:
        dp = int(parallel.dp)
    if dp * tp * sp > n_devices:
        raise UserError(
            f"parallel.dp={dp} x tp={tp} x sp={sp} = {dp * tp * sp} devices, only {n_devices} are visible: "
            f"lower parallel.dp"
        )
    if heads is not None:
        if heads % tp:
            raise UserError(f"parallel.tp={tp} must divide the model's {heads} attention heads: change parallel.tp")
        if sp_splits_heads and (heads // tp) % sp:
            raise UserError(
                f"parallel.sp={sp} must divide the {heads // tp} attention heads per tensor-parallel shard "
                f"(heads {heads} / tp {tp}): change parallel.sp"
            )
    if video_tokens is not None and video_tokens % sp:
        raise UserError(
            f"parallel.sp={sp} must divide the {video_tokens} video tokens of this run: change parallel.sp "
            f"(or sampling.height/width/num_frames)"
        )
    if batch % dp:
        hint = " (parallel.dp is null: it defaults to devices / (tp x sp); set it)" if parallel.dp is None else ""
        raise UserError(
            f"parallel.dp={dp} must divide the model batch of {batch}"
            f"{' (conditional + unconditional halves)' if batch == 2 else ''}{hint}: change parallel.dp"
        )
    if offload is not None and offload.enabled:
        for name, n in (block_groups or {}).items():
            chunk = chunk_size_of(offload.chunk_size, name)
            if n % chunk:
                key = f"offload.chunk_size.{name}" if isinstance(offload.chunk_size, Mapping) else "offload.chunk_size"
                raise UserError(f"{key}={chunk} must divide the {n} blocks of group {name!r}: change {key}")
    return MeshPlan(dp=dp, tp=tp, sp=sp)


def chunk_size_of(chunk_size: int | Mapping[str, int], group: str) -> int:
    """Blocks per offload transfer for ``group``: ``offload.chunk_size`` is one integer or {group: integer}
    (groups it does not name stream one block at a time)."""
    if isinstance(chunk_size, Mapping):
        return int(chunk_size.get(group, 1))
    return int(chunk_size)


def make_mesh(plan: MeshPlan, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A (dp, sp, tp) mesh over the first ``plan.size`` devices (all processes' devices under jax.distributed)."""
    devices = list(devices if devices is not None else jax.devices())[: plan.size]
    arr = np.asarray(devices, dtype=object).reshape(plan.dp, plan.sp, plan.tp)
    return Mesh(arr, AXES, axis_types=(AxisType.Auto,) * 3)
