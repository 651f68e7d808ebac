"""A device that runs out of memory is a condition of the run's settings, not a bug: one ``error:`` line naming the
phase, what XLA asked for and had, and the keys that lower what that phase holds (not "internal error").

XLA reports it as a runtime error whose text holds ``RESOURCE_EXHAUSTED`` (allocating a buffer, or loading a
program whose temporaries do not fit beside what is already placed, as a VAE decode does beside a resident
denoiser in a chunked run), or on the CPU "Out of memory allocating N bytes"; raised inside a plugin's hook it
arrives as the cause of the hook's error. A kernel whose tiles overflow the chip's vector memory when it compiles
(``CompileTimeScopedVmemOom``) is the engine's defect whatever the settings: it stays an internal error.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from vidax_core.errors import UserError

#: What lowers each phase's device memory.
ADVICE = {
    "encode": "on an accelerator set runtime.encode_on=cpu (the prompt encoder computes on the host); on the CPU "
              "the encoder needs a machine with more memory (the dry run's text encoder row says how much)",
    "sampling": "lower sampling.height / width / num_frames, or set runtime.batch_branches=false (one model call "
                "per guidance branch), offload.enabled=true, model.weight_dtype=float8_e4m3fn, or spread the run "
                "over more devices (parallel.sp / parallel.tp)",
    "decode": "set vae.tiling=true (the video decodes in spatial tiles), or lower sampling.height / width",
}


def xla_oom(exc: BaseException | None) -> BaseException | None:
    """XLA's out-of-memory error (``JaxRuntimeError`` / ``XlaRuntimeError``: RESOURCE_EXHAUSTED on an accelerator,
    "Out of memory allocating" on the CPU) in ``exc`` or its causes (a plugin's hook wraps what it raised)."""
    seen = 0
    while exc is not None and seen < 8:
        text = str(exc)
        xla = type(exc).__name__ in ("JaxRuntimeError", "XlaRuntimeError") and (
            "RESOURCE_EXHAUSTED" in text or "Out of memory" in text)
        # loading a program or allocating a buffer that does not fit arrives as a ValueError on the v5e (JAX 0.10.2):
        # "E0101: RuntimeProgramAllocationFailure", "E0100: RuntimeBufferAllocationFailure"
        loading = isinstance(exc, ValueError) and "RESOURCE_EXHAUSTED" in text and "AllocationFailure" in text
        if xla or loading:
            return None if "memory space vmem" in text or "VmemOom" in text else exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _detail(text: str) -> str:
    """What XLA asked for and had, where its message says so."""
    m = re.search(r"reserve ([\d.]+\s*[KMGT]i?B?)\b.*?There are ([\d.]+\s*[KMGT]i?B?) free", text, re.S)
    if m:
        return f"a program needed {m.group(1)}, {m.group(2)} was free"
    m = re.search(r"(?:allocate|allocating) (\d+) bytes", text)
    if m:
        return f"an allocation of {int(m.group(1)) / 2**30:.1f} GiB failed"
    m = re.search(r"(?:allocate|allocating) ([\d.]+\s*[KMGT]i?B?)", text)
    if m:
        return f"an allocation of {m.group(1)} failed"
    return " ".join(text.split())[:160]


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Turn XLA's out-of-memory error raised inside into a :class:`UserError` for phase ``name`` (a key of
    :data:`ADVICE`)."""
    try:
        yield
    except Exception as exc:
        found = xla_oom(exc)
        if found is None:
            raise
        raise UserError(f"out of memory during {name} ({_detail(str(found))}): "
                        f"{ADVICE[name]}") from exc
