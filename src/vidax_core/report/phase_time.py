"""The dry run's estimate of each phase's time on a named device: FLOPs over an assumed share of the peak.

An estimate, labelled so wherever it is printed, from three numbers and two assumptions:

* encode: 2 x the prompt encoders' matmul parameters (their token-embedding tables left out) x the tokens encoded
  (``sampling.max_sequence_length`` per prompt, each prompt the guidance reads); on the device at
  :data:`DEVICE_EFFICIENCY` of its peak, or on the host CPU (``runtime.encode_on`` resolved as the run would) at
  :data:`CPU_TFLOPS` (``VIDAX_CPU_TFLOPS`` overrides it);
* denoise: the family's FLOPs per step (:mod:`vidax_core.flops`, every guidance branch) x the steps of each pass,
  at :data:`DEVICE_EFFICIENCY` of the devices' peak;
* decode: not estimated from FLOPs (no VAE states a FLOP count); its first chunk also compiles.

:data:`DEVICE_EFFICIENCY` is the share of the bf16 peak the DiT steps reached on one TPU v5e (57-65% MFU,
docs/benchmarks.md); compile time is not included.
"""

from __future__ import annotations

import os
import re
from typing import Any

DEVICE_EFFICIENCY = 0.5
CPU_TFLOPS = 0.5  # the host CPU's float32 matmul rate assumed for an encode there (XLA:CPU, a server's cores)
_EMBEDDING = re.compile(r"(^|\.)(shared|embed_tokens|token_embedding|word_embeddings|wte|embeddings\.token)")


def cpu_rate() -> float:
    """FLOP/s assumed for the host CPU (``VIDAX_CPU_TFLOPS``, else :data:`CPU_TFLOPS`)."""
    try:
        return float(os.environ.get("VIDAX_CPU_TFLOPS") or CPU_TFLOPS) * 1e12
    except ValueError:
        return CPU_TFLOPS * 1e12


def encoder_matmul_params(ckpt: Any, components: tuple[str, ...]) -> int:
    """Parameters of ``components``' tensors from their headers, token-embedding tables left out (a lookup)."""
    import numpy as np

    total = 0
    for c in components:
        try:
            if not ckpt.has(c):
                continue
            source = ckpt.read_tensors(c)
        except Exception:  # noqa: BLE001 - no local weights: not counted
            continue
        for key in source:
            if _EMBEDDING.search(key):
                continue
            shape = source.shape(key) if hasattr(source, "shape") else np.shape(source[key])
            total += int(np.prod(shape, dtype=np.int64))
    return total


def _seconds(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s" if s < 600 else f"{s / 60:.1f} min"


def lines(cfg: Any, plan: Any, builds: list, ckpt: Any, spec: Any, peak: Any, label: str, devices: int,
          encode_where: str) -> list[str]:
    """The ``time:`` block of the dry run (empty without a named or known device)."""
    from vidax_core.flops import step_flops
    from vidax_core.report import throughput
    from vidax_core.placement.memory_plan import ENCODER_COMPONENTS

    if peak is None:
        return []
    dtype = builds[0].param_dtype
    rate = (throughput.peak_flops(peak, dtype)[0] or 0.0) * devices * DEVICE_EFFICIENCY
    out = [f"time:       estimate on {devices} x {label} at {DEVICE_EFFICIENCY:.0%} of its peak "
           f"({rate / 1e12:.0f} TFLOP/s assumed), compile time not included:"]
    text = int(cfg.sampling.max_sequence_length or 0)
    prompts = len(plan.guides[0].prompts) if plan.guides else 1
    params = encoder_matmul_params(ckpt, ENCODER_COMPONENTS)
    if params:
        flops = 2.0 * params * text * prompts
        moved = ""
        if encode_where == "cpu":
            where = f"host CPU at an assumed {cpu_rate() / 1e12:.2g} TFLOP/s (VIDAX_CPU_TFLOPS)"
            secs = flops / cpu_rate()
        else:
            where, secs = "device", flops / rate
            from vidax_core.placement.memory_plan import encoder_bytes

            weights = encoder_bytes(ckpt, spec, cfg) or 0
            if peak.h2d_gib_s and weights:  # its weights go to the device once per encode (read from the file first)
                secs = max(secs, weights / (peak.h2d_gib_s * 2**30))
                moved = f"; its {weights / 2**30:.1f} GiB of weights to the device at {peak.h2d_gib_s:g} GiB/s"
        out.append(f"  encode     ~{_seconds(secs)} ({prompts} prompt(s) x {text} tokens through {params / 1e9:.2f}B "
                   f"matmul parameters on the {where}{moved}; reading the files not included)")
    else:
        out.append("  encode     not estimated (the prompt encoders' weights are not at hand)")
    total = 0.0
    if builds[0].flops is None or not plan.complete:
        out.append("  denoise    not estimated (no latent grid, or the denoiser states no FLOP count)")
    else:
        steps, parts, bound = plan.total_steps, [], ""
        if plan.windows is not None:  # a chunked run: every window's steps at the largest window's cost
            branches = [tuple(b.name for b in plan.guides[0].branches)]
            total = (step_flops(builds[0], branches, plan.grids[0], text) or 0.0) * steps
            bound = ", every window at the largest window's cost: an upper bound"
        else:
            for guide, grid, splan in zip(plan.guides, plan.grids, plan.splans):
                total += (step_flops(builds[0], [tuple(b.name for b in guide.branches)], grid, text) or 0.0) \
                    * splan.num_steps
                parts.append(str(splan.num_steps))
        split = " = " + " + ".join(parts) if len(parts) > 1 else ""
        out.append(f"  denoise    ~{_seconds(total / rate)} ({steps} steps{split}, {total / 1e15:.3g} PFLOP{bound})")
    out.append("  decode     not estimated (no VAE states a FLOP count; its first chunk compiles too)")
    return out
