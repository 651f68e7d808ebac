"""Where each part of a run lives and whether the device holds what it must: the dry run's placement lines and
the run's choice of where the prompt encoder computes.

Per device the denoiser holds its resident weights (all of them, or with offload its non-block weights and two
chunks), the activations of one block, and for a moment the VAE; the prompt encoder is the part that may not fit
beside them (Wan's UMT5-XXL is 11 GB in bf16, 23 GB in the float32 vidax encodes it in). ``runtime.encode_on``:

* ``device``: the encoder computes on the run's devices;
* ``cpu``: on this host's CPU (JAX's CPU backend beside the accelerator), its weights in host memory; prompts
  encode more slowly, but a one-chip run of a 14B model with a 6B encoder needs no second copy of anything on the
  chip and the denoiser need not step aside;
* ``auto``: ``device`` where the encoder (estimated from its checkpoint files at the dtype it computes in:
  float32, or the denoiser's weight dtype for the LLM encoders a model declares) fits the device's
  memory beside what is placed when it runs (the VAE for ``vidax run``, which builds its VAE, then encodes, then
  places the denoiser; the denoiser's device weights for a loaded pipe), else ``cpu``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax

ENCODE_ON = ("auto", "device", "cpu")
ENCODER_COMPONENTS = ("text_encoder", "text_encoder_2", "text_encoder_3", "image_encoder")
MARGIN = 0.9  # of the device's memory: the rest is left to XLA's own buffers


def component_bytes(ckpt: Any, component: str, *, as_float32: bool = False, itemsize: int | None = None,
                    skip: tuple[str, ...] = ()) -> int | None:
    """Bytes of ``component``'s weights from its file headers (float tensors counted at ``itemsize`` bytes, 4 with
    ``as_float32``; keys starting with a prefix of ``skip`` left out); None when the files are not at hand (a dry
    run of a hub repo fetches JSON only)."""
    itemsize = itemsize or (4 if as_float32 else None)
    import numpy as np

    try:
        if not ckpt.has(component):
            return None
        source = ckpt.read_tensors(component)
    except Exception:  # noqa: BLE001 - no local weights: not sized
        return None
    total = 0
    for key in source:
        if skip and key.startswith(skip):
            continue
        n = source.nbytes(key) if hasattr(source, "nbytes") else int(np.asarray(source[key]).nbytes)
        if itemsize and hasattr(source, "dtype"):
            dt = np.dtype(source.dtype(key))
            if dt.kind == "f" or dt.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                n = n // dt.itemsize * itemsize
        total += n
    return total


#: A diffusers autoencoder's encoder half: a run that encodes no image or clip builds its VAE without it.
VAE_ENCODER_KEYS = ("encoder.", "quant_conv.")


def vae_bytes(ckpt: Any, run: Any) -> int | None:
    """The VAE's bytes at float32 as a run builds it: decoder only unless the run encodes an image, a clip or a
    conditioning item (:func:`vidax_core.model_api.vae_encodes`; every family's VAE builder leaves the encoder out
    otherwise)."""
    from vidax_core.model_api import vae_encodes

    return component_bytes(ckpt, "vae", as_float32=True, skip=() if vae_encodes(run) else VAE_ENCODER_KEYS)


def encoder_dtype(spec: Any, cfg: Any, component: str = "text_encoder") -> str:
    """The dtype ``component`` computes in: the denoiser's weight dtype where the model declares it
    (``ModelSpec.encoders_in_weight_dtype``: the LLM encoders), else float32."""
    import numpy as np

    from vidax_core.model_api import dit_weight_dtype

    if spec is not None and component in getattr(spec, "encoders_in_weight_dtype", ()):
        return np.dtype(dit_weight_dtype(cfg)).name
    return "float32"


def encoder_bytes(ckpt: Any, spec: Any = None, cfg: Any = None, *, cpu: bool = False) -> int | None:
    """The prompt (and image) encoders' bytes in the dtypes they compute in (:func:`encoder_dtype`), from their
    files (None when none is sized). ``cpu``: on the CPU backend an encoder held in bf16 also gets the float32 copy
    of its weights XLA:CPU makes for its matmuls (Cosmos-Reason1 asked for 25 GiB at once so)."""
    import numpy as np

    def itemsize(c: str) -> int:
        n = np.dtype(encoder_dtype(spec, cfg, c)).itemsize
        return n + 4 if cpu and n < 4 else n

    sizes = [component_bytes(ckpt, c, itemsize=itemsize(c)) for c in ENCODER_COMPONENTS]
    sizes = [s for s in sizes if s]
    return sum(sizes) if sizes else None


def device_budget(peak: Any = None) -> int | None:
    """Bytes one device can hold: the backend's own limit where it reports one, else the peak table's memory."""
    if peak is None:
        try:
            stats = jax.local_devices()[0].memory_stats() or {}
        except Exception:  # noqa: BLE001
            stats = {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"])
        from vidax_core.runner import throughput

        peak = throughput.local_peak()
    mem = getattr(peak, "memory_gib", None)
    return int(mem * 2**30) if mem else None


def cpu_available() -> bool:
    try:
        return bool(jax.devices("cpu"))
    except RuntimeError:
        return False


@dataclass
class EncoderPlacement:
    where: str  # device | cpu
    reason: str


def encoder_placement(cfg: Any, ckpt: Any, beside_bytes: int, peak: Any = None, spec: Any = None
                      ) -> EncoderPlacement:
    """Where the prompt encoder computes for ``cfg`` (``runtime.encode_on``), with ``beside_bytes`` of this
    run's weights on the device while it does; ``peak``: a named target device (the dry run's ``--device``),
    else this process's devices; ``spec``: the model (which encoders compute in its weight dtype)."""
    asked = getattr(cfg.runtime, "encode_on", "auto")
    if asked in ("device", "cpu"):
        return EncoderPlacement(asked, f"runtime.encode_on={asked}")
    if peak is None and jax.default_backend() == "cpu":
        return EncoderPlacement("device", "the devices are this host's CPU")
    need, budget = encoder_bytes(ckpt, spec, cfg), device_budget(peak)
    dt = encoder_dtype(spec, cfg)
    if need is None or budget is None:
        return EncoderPlacement("device", "its size or the device's memory is not known")
    if need + beside_bytes <= MARGIN * budget:
        return EncoderPlacement("device", f"{need / 2**30:.1f} GiB ({dt}) + {beside_bytes / 2**30:.1f} GiB placed "
                                          f"fit the device's {budget / 2**30:.1f} GiB")
    if peak is None and not cpu_available():
        return EncoderPlacement("device", f"it does not fit ({need / 2**30:.1f} GiB at {dt}) but JAX has no CPU "
                                          "backend here (JAX_PLATFORMS excludes cpu)")
    return EncoderPlacement("cpu", f"{need / 2**30:.1f} GiB ({dt}) + {beside_bytes / 2**30:.1f} GiB placed exceed "
                                   f"{MARGIN:.0%} of the device's {budget / 2**30:.1f} GiB")


def cpu_scope():
    """The context the encoder builds and runs in when it computes on the host's CPU."""
    return jax.default_device(jax.devices("cpu")[0])


@dataclass
class Placement:
    """The dry run's placement table: (part, where, device bytes, host bytes, note, phase) rows and the verdict.
    ``vidax run`` encodes its prompts before it places the denoiser, so the peaks are the larger of the ``encode``
    phase's and the ``denoise`` phase's sums."""

    rows: list[tuple[str, str, int, int, str, str]] = field(default_factory=list)  # phase: encode|denoise|both
    budget: int | None = None

    def add(self, part: str, where: str, device: int = 0, host: int = 0, note: str = "",
            phase: str = "denoise") -> None:
        self.rows.append((part, where, int(device), int(host), note, phase))

    def _peak(self, column: int) -> int:
        return max(sum(r[column] for r in self.rows if r[5] in (phase, "both")) for phase in ("encode", "denoise"))

    def device_peak(self) -> int:
        return self._peak(2)

    def host_total(self) -> int:
        return self._peak(3)

    def lines(self, fmt) -> list[str]:
        out = [f"placement:  per device{' of ' + fmt(self.budget) if self.budget else ''}"]
        for part, where, dev, host, note, _phase in self.rows:
            amounts = ", ".join(x for x in (f"device {fmt(dev)}" if dev else "", f"host {fmt(host)}" if host else "")
                                if x) or "-"
            out.append(f"  {part:<13} {where:<26} {amounts}{'; ' + note if note else ''}")
        peak = self.device_peak()
        if self.budget:
            verdict = "fits" if peak <= self.budget else (
                "does not fit: set offload.enabled=true (and a smaller offload.chunk_size), model.weight_dtype="
                "float8_e4m3fn, or parallel.tp / parallel.sp over more devices")
            out.append(f"  peak per device ~{fmt(peak)} of {fmt(self.budget)}: {verdict}")
        else:
            out.append(f"  peak per device ~{fmt(peak)} (the device's memory is not known: name one with --device)")
        out.append(f"  host memory ~{fmt(self.host_total())} held by the run at its peak (beside the runtime's own and "
                   "the page cache of the checkpoint files)")
        return out
