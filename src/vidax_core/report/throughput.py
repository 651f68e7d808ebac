"""FLOPs per step, achieved FLOP/s and MFU of a run, against a table of device peaks.

MFU = FLOPs of one denoising step (every model call of it: all guidance branches; :mod:`vidax_core.flops`) /
steady-state seconds per step / (peak FLOP/s of one device x devices in the mesh). The peaks are the vendors'
dense (no sparsity) tensor-core figures per device: bf16 for bf16/fp16/fp32 weights (fp32 matmuls on these
machines run on the same units at lower rates, so MFU then reads low, as it should), fp8 (int8 where a device
has no fp8) for ``model.weight_dtype`` float8/int8 runs.

Override the table with ``VIDAX_PEAK_TFLOPS`` (TFLOP/s of one device, used for every precision) or name a
device of the table with ``VIDAX_DEVICE`` (e.g. ``h200``) when JAX's device kind string is not recognised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from vidax_core.errors import UserError


@dataclass(frozen=True)
class Peak:
    """Dense peak TFLOP/s of one device: ``bf16`` and ``low`` (fp8, or int8 where there is no fp8)."""

    name: str
    match: tuple[str, ...]  # lower-case substrings of jax's device_kind
    bf16: float
    low: float
    memory_gib: float
    policy: str = "bfloat16"  # the weight dtype a run on it uses (model_api.dit_weight_dtype)
    runtime_host_gib: float | None = None  # host memory its runtime holds by itself (None: not measured)
    h2d_gib_s: float | None = None  # host to device from pageable memory, GiB/s (None: not measured)
    #: host memory a VAE decode holds beyond its frames while its programs compile and its output comes back
    #: (None: not measured)
    decode_host_gib: float | None = None


# Vendor datasheets: NVIDIA H100/H200 SXM, A100, L40S, B200 (dense); Google Cloud TPU system architecture pages.
PEAKS: dict[str, Peak] = {p.name: p for p in (
    Peak("h200", ("h200",), 989.4, 1978.9, 141 * 1e9 / 2**30),
    Peak("h100", ("h100 80gb hbm3", "h100 sxm", "h100"), 989.4, 1978.9, 80 * 1e9 / 2**30),
    Peak("h100-pcie", ("h100 pcie",), 756.0, 1513.0, 80 * 1e9 / 2**30),
    Peak("b200", ("b200",), 2250.0, 4500.0, 180 * 1e9 / 2**30),
    Peak("a100", ("a100",), 312.0, 624.0, 80 * 1e9 / 2**30),
    Peak("l40s", ("l40s",), 362.05, 733.0, 48 * 1e9 / 2**30),
    Peak("tpu-v4", ("tpu v4",), 275.0, 275.0, 32.0),
    Peak("tpu-v5e", ("tpu v5 lite", "tpu v5e"), 197.0, 394.0, 15.75, runtime_host_gib=14.0,
         h2d_gib_s=1.58, decode_host_gib=3.0),  # docs/memory.md; memory: JAX's bytes_limit of its 16 GiB HBM
    Peak("tpu-v5p", ("tpu v5p", "tpu v5"), 459.0, 918.0, 95.0),
    Peak("tpu-v6e", ("tpu v6 lite", "tpu v6e", "tpu v6"), 918.0, 1836.0, 32.0),
)}
LOW_PRECISION = ("float8", "fp8", "int8", "e4m3", "e5m2")


def named(name: str) -> Peak:
    """The table entry ``name`` (``h200``, ``tpu-v5e``...); a one-line :class:`UserError` for an unknown one."""
    key = name.strip().lower()
    if key not in PEAKS:
        raise UserError(f"device {name!r} is not in the peak table: use one of {', '.join(PEAKS)}")
    return PEAKS[key]


def for_kind(device_kind: str) -> Peak | None:
    """The entry of a JAX ``device_kind`` string: the longest matching name wins ("h100 pcie" over "h100")."""
    kind = device_kind.lower()
    pairs = sorted(((m, p) for p in PEAKS.values() for m in p.match), key=lambda mp: -len(mp[0]))
    return next((p for m, p in pairs if m in kind), None)


def local_peak() -> Peak | None:
    """The entry of this process's first device (``VIDAX_DEVICE`` names one explicitly), None when unknown (CPU)."""
    if os.environ.get("VIDAX_DEVICE"):
        return named(os.environ["VIDAX_DEVICE"])
    import jax

    return for_kind(getattr(jax.devices()[0], "device_kind", ""))


def peak_flops(peak: Peak | None, dtype: Any) -> tuple[float | None, str]:
    """(peak FLOP/s of one device for weights of ``dtype``, where the figure comes from)."""
    if os.environ.get("VIDAX_PEAK_TFLOPS"):
        return float(os.environ["VIDAX_PEAK_TFLOPS"]) * 1e12, "VIDAX_PEAK_TFLOPS"
    if peak is None:
        return None, "no peak known for this device (set VIDAX_PEAK_TFLOPS or VIDAX_DEVICE)"
    low = any(s in str(dtype).lower() for s in LOW_PRECISION)
    return (peak.low if low else peak.bf16) * 1e12, f"{peak.name} {'fp8/int8' if low else 'bf16'} dense peak"


def utilisation(flops_per_step: float | None, per_step_s: float | None, devices: int, dtype: Any,
                peak: Peak | None, dense_flops_per_step: float | None = None,
                sparse: dict[str, float] | None = None) -> dict[str, Any]:
    """The metrics entries: flops_per_step, achieved_flops_per_s, peak_flops_per_s (all devices), mfu. With sparse
    attention (``sparse``: its measured density per kind) ``flops_per_step`` is the work computed and the entries
    add the dense equivalent: ``dense_equivalent_flops_per_step``, ``dense_equivalent_mfu`` (what the step would
    read counting dense attention) and ``sparse_speedup`` (dense FLOPs over computed: how much less work the
    sparsity leaves at equal efficiency)."""
    rate = peak_flops(peak, dtype)
    out: dict[str, Any] = {"flops_per_step": flops_per_step, "achieved_flops_per_s": None,
                           "peak_flops_per_s": rate[0] * devices if rate[0] else None, "peak_source": rate[1],
                           "mfu": None}
    if flops_per_step and per_step_s and per_step_s > 0:
        out["achieved_flops_per_s"] = flops_per_step / per_step_s
        if out["peak_flops_per_s"]:
            out["mfu"] = out["achieved_flops_per_s"] / out["peak_flops_per_s"]
    if sparse:
        out.update(sparse_attention_density=dict(sparse), dense_equivalent_flops_per_step=dense_flops_per_step,
                   dense_equivalent_mfu=None, sparse_speedup=None)
        if dense_flops_per_step and flops_per_step:
            out["sparse_speedup"] = dense_flops_per_step / flops_per_step
            if out["mfu"] is not None:
                out["dense_equivalent_mfu"] = out["mfu"] * out["sparse_speedup"]
    return out


def run_metrics(build: Any, batches: Sequence[Sequence[str]], grid: Sequence[int], contexts: Sequence[Any],
                per_step_s: float | None, devices: int, attention_calls: dict | None = None) -> dict[str, Any]:
    """Throughput entries of ``output.metrics`` for the last pass: ``build`` the denoiser its steps call,
    ``batches`` its model calls per step, ``grid`` its latent grid, ``contexts`` its prompt contexts,
    ``attention_calls`` the pipe's call records (sparse attention's measured density)."""
    from vidax_core.attention.sparsity import densities
    from vidax_core.flops import context_tokens, step_flops

    text = max((context_tokens(c) for c in contexts), default=0)
    sparse = densities(attention_calls) if attention_calls else {}
    flops = step_flops(build, batches, grid, text, sparse=sparse)
    dense = step_flops(build, batches, grid, text) if sparse else None
    return utilisation(flops, per_step_s, devices, getattr(build, "param_dtype", None), local_peak(), dense, sparse)


def ideal_step_s(flops_per_step: float | None, peak: Peak, dtype: Any, devices: int = 1) -> float | None:
    """Seconds one step would take at 100% of ``devices`` x the peak (the dry run's lower bound)."""
    rate, _ = peak_flops(peak, dtype)
    return flops_per_step / (rate * devices) if flops_per_step and rate else None
