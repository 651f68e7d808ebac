"""Where each part of a run lives and whether the device holds what it must: the dry run's placement lines and
the run's choice of where the prompt encoders compute.

Per device the denoiser holds its resident weights (all of them, or with offload its non-block weights and two
chunks), the activations of one block, and for a moment the VAE; the prompt encoders are the part that may not
fit beside them (Wan's UMT5-XXL is 11 GB in bf16, LTX-2's Gemma-3 12B 24 GB). Encoders compute in the run's compute
dtype (bf16 on an accelerator, float32 on the CPU; :func:`encoder_dtype`). ``runtime.encode_on``:

* ``device``: the encoders are placed whole on the run's devices;
* ``stream``: they compute on the run's devices with their stacked layers streamed from the checkpoint file a
  chunk at a time by the offload executor (:mod:`vidax_core.parallel.streamed`): the device holds the layers
  outside the stacks and two chunks, the host only the chunks in flight;
* ``cpu``: on this host's CPU (JAX's CPU backend beside the accelerator), their weights in host memory;
* ``auto``: ``device`` where the encoders fit the device's memory beside what is placed when they run (the VAE
  for ``vidax run``, which builds its VAE, then encodes, then places the denoiser; the denoiser's device weights
  for a loaded pipe), else ``stream`` (the largest chunk that fits), else ``cpu``. On the CPU backend the devices
  are host memory: ``stream`` when the run bounds what it holds (``offload.enabled``), else ``device``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import jax

ENCODE_ON = ("auto", "device", "stream", "cpu")
ENCODER_COMPONENTS = ("text_encoder", "text_encoder_2", "text_encoder_3", "image_encoder")
MARGIN = 0.9  # of the device's memory: the rest is left to XLA's own buffers
#: the towers whose stacked layers stream (vidax_core.encoders: T5 family, decoder LLMs), by config model_type
STREAMED_TOWERS = ("t5", "umt5", "mt5", "llama", "qwen", "gemma", "mistral")
STAGING_LIMIT = 2 << 30  # host bytes of one streamed chunk in flight, at most


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


def tiling_options(value: Any) -> Any:
    """A ``vae.tiling`` value as an object with ``enabled`` and tile sizes (the reference's defaults when on)."""
    from types import SimpleNamespace

    from vidax_core.vae.tiling import TilingOptions

    if isinstance(value, Mapping) or hasattr(value, "items"):
        knobs = {**vars(TilingOptions(enabled=True)), **dict(value)}
        return SimpleNamespace(**knobs)
    return TilingOptions.coerce(bool(value))


def tile_overlap(tiling: Any, height: int, width: int) -> float:
    """How many times a tiled decode's tile outputs cover the frame (the tiled stream holds them all on the host
    until the last tile is in: :class:`vidax_core.vae.tiling.TiledStream`): tile / stride per axis the frame is
    larger than a tile along (a fractional overlap ``f``: 1 / (1 - f)); 1.0 untiled."""
    t = tiling_options(tiling)
    if not t.enabled:
        return 1.0
    cover = 1.0
    for axis, size in (("height", height), ("width", width)):
        tile = int(getattr(t, f"tile_sample_min_{axis}", 0) or 0)
        if not tile or size <= tile:
            continue
        stride = getattr(t, f"tile_sample_stride_{axis}", None)
        factor = getattr(t, f"tile_overlap_factor_{axis}", None) or getattr(t, "tile_overlap_factor", None)
        stride = None if factor else stride  # a VAE that tiles by an overlap factor has no stride knob
        cover *= tile / stride if stride else 1.0 / (1.0 - float(factor)) if factor else 1.0
    return cover


def vae_config(ckpt: Any) -> Mapping[str, Any] | None:
    """The checkpoint's ``vae/config.json``, or None where it has none at hand."""
    try:
        return ckpt.config("vae") if ckpt is not None and ckpt.has("vae") else None
    except Exception:  # noqa: BLE001 - no VAE config at hand
        return None


def decode_bytes(spec: Any, ckpt: Any, run: Any, tiling: Any = None) -> int | None:
    """Device bytes of one decode program of ``run``'s video beyond the VAE's weights (:mod:`vidax_core.vae.
    decode_memory`), tiled as ``run`` says (or as ``tiling``, a ``vae.tiling`` value); None without the VAE's
    config."""
    from vidax_core.vae.decode_memory import decode_bytes as estimate

    config = vae_config(ckpt)
    if config is None:
        return None
    s = run.sampling
    tiling = tiling_options(getattr(run.vae, "tiling", False) if tiling is None else tiling)
    return estimate(config, int(s.num_frames or 1), int(s.height), int(s.width),
                    getattr(spec, "vae_decode_frames", None), tiling)


def decode_tiling(spec: Any, ckpt: Any, run: Any, held_bytes: int, peak: Any = None) -> tuple[Any, str | None]:
    """``run``'s ``vae.tiling``, or ``True`` (the reference's tile knobs) where the untiled decode would not fit
    the device beside the ``held_bytes`` of weights placed while it runs, or 128-pixel tiles
    (:func:`smaller_tile_knobs`) where one of the reference's tiles would not fit either; with the line that says
    so. A ``vae.tiling`` the run sets is kept as it is."""
    asked = getattr(run.vae, "tiling", False)
    budget = device_budget(peak)
    if asked is not False or budget is None or (peak is None and jax.default_backend() == "cpu"):
        return asked, None
    need = decode_bytes(spec, ckpt, run)
    if need is None or need + held_bytes <= MARGIN * budget:
        return asked, None
    beside = f"beside {held_bytes / 2**30:.1f} GiB of weights on the device's {budget / 2**30:.1f} GiB"
    tiled, knobs = decode_bytes(spec, ckpt, run, tiling=True), smaller_tile_knobs(ckpt)
    if tiled is not None and tiled + held_bytes > MARGIN * budget and knobs is not None:
        small = decode_bytes(spec, ckpt, run, tiling=knobs)
        if small is not None and small + held_bytes <= MARGIN * budget:
            return knobs, (f"decoding in 128-pixel tiles (vae.tiling={knobs_text(knobs)}): the untiled decode "
                           f"needs ~{need / 2**30:.1f} GiB and one of the reference's tiles ~{tiled / 2**30:.1f} "
                           f"GiB {beside}")
    return True, (f"decoding tiled (vae.tiling=true, the reference's tile sizes): the untiled decode needs "
                  f"~{need / 2**30:.1f} GiB {beside}")


def encoder_dtype(spec: Any, cfg: Any, component: str = "text_encoder") -> str:
    """The dtype the encoders compute in: the run's compute dtype (``model.dtype``, else bf16 on GPU/TPU and
    float32 on the CPU), as the reference pipelines run them when loaded in that dtype."""
    import numpy as np

    from vidax_core.model_api import dit_weight_dtype

    return np.dtype(dit_weight_dtype(cfg)).name


@dataclass(frozen=True)
class EncoderSize:
    """One encoder component's weights as its tower holds them (in its compute dtype, the Linear kernels a file
    stores 8-bit at their stored bytes and scales, :mod:`vidax_core.quant.stored`): in all, in its stacked layers
    (the largest layer, their number), whether its tower streams them (:data:`STREAMED_TOWERS`), and the bytes
    and dtype of its 8-bit kernels."""

    component: str
    total: int
    largest_layer: int = 0
    depth: int = 0
    streams: bool = False
    eight_bit: int = 0
    weight_dtype: str | None = None  # the 8-bit kernels' dtype (None: every weight in the compute dtype)

    def device_bytes(self, layers_per_chunk: int) -> int:
        """Device bytes when streamed ``layers_per_chunk`` at a time (two chunks in flight), else in all."""
        if not self.streams or not layers_per_chunk or self.depth < 2:
            return self.total
        return self.total - self.depth * self.largest_layer + min(2 * layers_per_chunk, self.depth) * self.largest_layer


def encoder_sizes(ckpt: Any, spec: Any = None, cfg: Any = None) -> list[EncoderSize]:
    """:class:`EncoderSize` of every encoder component whose files are at hand, at :func:`encoder_dtype`."""
    import numpy as np

    from vidax_core.quant.stored import LAYER_KEY

    itemsize = np.dtype(encoder_dtype(spec, cfg)).itemsize
    out = []
    for c in ENCODER_COMPONENTS:
        try:
            if ckpt is None or not ckpt.has(c):
                continue
            source = ckpt.read_tensors(c)
            model_type = str(ckpt.config(c).get("model_type", ""))
        except Exception:  # noqa: BLE001 - no local weights: not sized
            continue
        total, eight, per_layer, dtypes = 0, 0, {}, set()
        for key in source:
            n, kept = _bytes_at(source, key, itemsize)
            total += n
            if kept:
                eight += n
                dtypes.add(kept)
            m = LAYER_KEY.search(key)
            if m:
                per_layer[int(m.group(1))] = per_layer.get(int(m.group(1)), 0) + n
        streams = model_type.startswith(STREAMED_TOWERS) and len(per_layer) > 1
        out.append(EncoderSize(c, total, max(per_layer.values(), default=0), len(per_layer), streams, eight,
                               "/".join(sorted(dtypes)) or None))
    return out


def _bytes_at(source: Any, key: str, itemsize: int) -> tuple[int, str | None]:
    """(bytes a tensor is held in, its dtype name when its tower keeps it 8-bit): floating values at ``itemsize``,
    a Linear weight the file stores 8-bit at its stored bytes and one fp32 scale per output channel."""
    import numpy as np

    from vidax_core.quant.stored import held_bytes, stays_8bit

    n = source.nbytes(key) if hasattr(source, "nbytes") else int(np.asarray(source[key]).nbytes)
    if hasattr(source, "dtype"):
        dt = np.dtype(source.dtype(key))
        shape = tuple(source.shape(key)) if hasattr(source, "shape") else ()
        if stays_8bit(key, dt, shape):
            return held_bytes(shape), dt.name
        if dt.kind == "f" or dt.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            n = n // dt.itemsize * itemsize
    return n, None


def encoder_weights(sizes: list[EncoderSize], dtype: str) -> str:
    """How the encoders hold their weights, for the dry run's and the log's lines: ``bfloat16``, or
    ``float8_e4m3fn weights, bfloat16 compute`` where a file's Linear kernels stay 8-bit."""
    stored = sorted({s.weight_dtype for s in sizes if s.weight_dtype})
    return f"{'/'.join(stored)} weights, {dtype} compute" if stored else dtype


def encoder_bytes(ckpt: Any, spec: Any = None, cfg: Any = None, *, cpu: bool = False) -> int | None:
    """The encoders' bytes in their compute dtype, whole (None when none is sized). ``cpu``: on the CPU backend a
    bf16 encoder also gets the float32 copy of its weights XLA:CPU makes for its matmuls (Cosmos-Reason1 asked
    for 25 GiB at once so)."""
    import numpy as np

    sizes = encoder_sizes(ckpt, spec, cfg)
    if not sizes:
        return None
    total = sum(s.total for s in sizes)
    itemsize = np.dtype(encoder_dtype(spec, cfg)).itemsize
    wide = total - sum(s.eight_bit for s in sizes)  # an 8-bit kernel is converted a layer at a time in its matmul
    return total + (wide // itemsize * 4 if cpu and itemsize < 4 else 0)


def device_budget(peak: Any = None) -> int | None:
    """Bytes one device can hold: the backend's own limit where it reports one, else the peak table's memory."""
    if peak is None:
        try:
            stats = jax.local_devices()[0].memory_stats() or {}
        except Exception:  # noqa: BLE001
            stats = {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"])
        from vidax_core.report import throughput

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
    where: str  # device | stream | cpu | none (no encoder tower)
    reason: str
    layers_per_chunk: int = 0  # ``stream``: layers of each streamed encoder per chunk
    device_bytes: int = 0  # what the encoders hold on each device while they compute (0: not sized)
    weights: str = ""  # how they hold their weights (:func:`encoder_weights`; empty: not sized)


def streamed_chunk(sizes: list[EncoderSize], room: int) -> int:
    """The most layers per chunk whose encoders fit ``room`` bytes (two chunks in flight; one chunk's host staging
    at most :data:`STAGING_LIMIT`); 0 when not even one layer per chunk fits or nothing streams."""
    streams = [s for s in sizes if s.streams]
    if not streams:
        return 0
    deepest = max(s.depth for s in streams)
    best = 0
    for k in range(1, deepest + 1):
        if any(k * s.largest_layer > STAGING_LIMIT for s in streams) and k > 1:
            break
        if sum(s.device_bytes(k) for s in sizes) <= room:
            best = k
    return best


def lists_no_encoder(ckpt: Any) -> bool:
    """Whether the checkpoint's ``model_index.json`` names its components and none of them is a prompt or image
    encoder (Cosmos3: its denoiser embeds the token ids itself). False where it is not known (no index)."""
    index = getattr(ckpt, "model_index", None) or {}
    named = {k for k, v in index.items() if not k.startswith("_") and isinstance(v, (list, tuple)) and v and v[0]}
    return bool(named) and not named & set(ENCODER_COMPONENTS)


def encoder_placement(cfg: Any, ckpt: Any, beside_bytes: int, peak: Any = None, spec: Any = None
                      ) -> EncoderPlacement:
    """Where the prompt encoders compute for ``cfg`` (``runtime.encode_on``), with ``beside_bytes`` of this
    run's weights on the device while they do; ``peak``: a named target device (the dry run's ``--device``),
    else this process's devices; ``spec``: the model. Its ``weights`` say how they hold their weights; ``none``
    where the checkpoint has no encoder tower at all."""
    sizes = encoder_sizes(ckpt, spec, cfg)
    if not sizes and lists_no_encoder(ckpt):
        return EncoderPlacement("none", "the checkpoint has no text or image encoder component")
    dt = encoder_weights(sizes, encoder_dtype(spec, cfg))
    place = _placement(cfg, sizes, dt, beside_bytes, peak)
    place.weights = dt
    return place


def _placement(cfg: Any, sizes: list[EncoderSize], dt: str, beside_bytes: int, peak: Any) -> EncoderPlacement:
    asked = getattr(cfg.runtime, "encode_on", "auto")
    need = sum(s.total for s in sizes)
    budget = device_budget(peak)
    cpu_devices = peak is None and jax.default_backend() == "cpu"
    room = int(MARGIN * budget) - beside_bytes if budget else None

    def stream(reason: str) -> EncoderPlacement:
        k = streamed_chunk(sizes, room) if room is not None and not cpu_devices else 0
        if not k:  # nothing known to fit: the smallest chunks
            k = 1 if any(s.streams for s in sizes) else 0
        if not k:
            return EncoderPlacement("device", reason + "; no encoder of this model streams its layers", 0, need)
        held = sum(s.device_bytes(k) for s in sizes)
        return EncoderPlacement("stream", f"{reason}; {k} layer{'s' if k > 1 else ''} per chunk, "
                                          f"{held / 2**30:.1f} GiB on the device at once", k, held)

    if asked == "cpu":
        return EncoderPlacement("cpu", "runtime.encode_on=cpu", 0, 0)
    if asked == "device":
        return EncoderPlacement("device", "runtime.encode_on=device", 0, need)
    if asked == "stream":
        return stream("runtime.encode_on=stream")
    if not sizes:
        return EncoderPlacement("device", "its size is not known (no local weights)")
    if cpu_devices:
        if cfg.offload.enabled and any(s.streams for s in sizes):
            return stream(f"the devices are this host's CPU and offload.enabled bounds what the run holds "
                          f"({need / 2**30:.1f} GiB at {dt} whole)")
        return EncoderPlacement("device", "the devices are this host's CPU", 0, need)
    if budget is None:
        return EncoderPlacement("device", "the device's memory is not known", 0, need)
    if need <= room:
        return EncoderPlacement("device", f"{need / 2**30:.1f} GiB ({dt}) + {beside_bytes / 2**30:.1f} GiB placed "
                                          f"fit the device's {budget / 2**30:.1f} GiB", 0, need)
    over = (f"{need / 2**30:.1f} GiB ({dt}) + {beside_bytes / 2**30:.1f} GiB placed exceed {MARGIN:.0%} of the "
            f"device's {budget / 2**30:.1f} GiB")
    if any(s.streams for s in sizes) and streamed_chunk(sizes, room):
        return stream(over)
    if peak is None and not cpu_available():
        return stream(over + " and JAX has no CPU backend here (JAX_PLATFORMS excludes cpu)")
    return EncoderPlacement("cpu", over + " even streamed", 0, 0)


def cpu_scope():
    """The context the encoder builds and runs in when it computes on the host's CPU."""
    return jax.default_device(jax.devices("cpu")[0])


PHASES = ("encode", "denoise", "decode")
#: a device peak above this share of the device's memory is "at the edge": Wan2.1-14B at 720p, estimated at 15.7 of
#: the v5e's 15.75 GiB, failed to load its second step's program
EDGE = 0.95
#: the advice for a tiled decode that does not fit (the dry run's row, the run's warning before sampling)
SMALLER_TILES = "smaller tiles: vae.tiling={tile_sample_min_height: 128, tile_sample_min_width: 128, ...}"


def smaller_tile_knobs(ckpt: Any) -> dict[str, float] | None:
    """128-pixel tiles, with every knob the checkpoint's VAE needs for them to tile edge to edge (a stride below
    the tile; HunyuanVideo-1.5's latent tile, which its reference does not derive from the pixel tile; CogVideoX's
    overlap factors keep their defaults); None without a VAE config."""
    config = vae_config(ckpt) or {}
    kind = str(config.get("_class_name", ""))
    if not kind:
        return None
    knobs = {"tile_sample_min_height": 128, "tile_sample_min_width": 128}
    if kind == "AutoencoderKLHunyuanVideo15":
        latent = 128 // int(config.get("spatial_compression_ratio") or 16)
        knobs.update(tile_latent_min_height=latent, tile_latent_min_width=latent, tile_overlap_factor=0.25)
    elif kind != "AutoencoderKLCogVideoX":
        knobs.update(tile_sample_stride_height=96, tile_sample_stride_width=96)
    return knobs


def knobs_text(knobs: Mapping[str, Any]) -> str:
    """A ``vae.tiling`` mapping as the key's value is written on the command line: ``{name: value, ...}``."""
    return "{" + ", ".join(f"{k}: {v}" for k, v in knobs.items()) + "}"


def smaller_tiles(ckpt: Any) -> str:
    """The advice for a tiled decode that does not fit (:func:`smaller_tile_knobs`), as a key to set."""
    knobs = smaller_tile_knobs(ckpt)
    return SMALLER_TILES if knobs is None else f"smaller tiles: vae.tiling={knobs_text(knobs)}"


@dataclass
class Row:
    """One part of a run: where it lives, its bytes per device and on the host, and the phases it is held in
    (``vidax run`` encodes before it places the denoiser, and decodes with the denoiser still placed)."""

    part: str
    where: str
    device: int = 0
    host: int = 0
    note: str = ""
    phases: tuple[str, ...] = ("denoise", "decode")
    device_key: str | None = None  # the run keys that shrink this part on the device / on the host (none set yet)
    host_key: str | None = None
    compiling: bool = False  # held while programs compile: not held when the compilation cache serves them


@dataclass
class Placement:
    """The dry run's placement table and its verdicts, per device and per host: :class:`Row` s, the device's
    memory (``budget``), the host's (``host_budget``: what the machine has available, or ``--host-memory``), what
    the process holds before the run's parts (``process_bytes``) and, for a named target device, what its
    runtime takes of the host by itself (``runtime_bytes``: a TPU v5e's runtime about 14 GiB)."""

    rows: list[Row] = field(default_factory=list)
    budget: int | None = None
    host_budget: int | None = None
    host_label: str = "available"
    process_bytes: int = 0
    runtime_bytes: int | None = None
    encoder_where: str | None = None  # where the prompt encoder computes (EncoderPlacement.where), once decided

    def add(self, part: str, where: str, device: int = 0, host: int = 0, note: str = "",
            phases: tuple[str, ...] | str = ("denoise", "decode"), device_key: str | None = None,
            host_key: str | None = None, compiling: bool = False) -> None:
        phases = PHASES if phases == "all" else (phases,) if isinstance(phases, str) else tuple(phases)
        self.rows.append(Row(part, where, int(device), int(host), note, phases, device_key, host_key, compiling))

    def _phase_sum(self, column: str, phase: str, warm: bool = False) -> int:
        return sum(getattr(r, column) for r in self.rows if phase in r.phases and not (warm and r.compiling))

    def _peak_phase(self, column: str, warm: bool = False) -> str:
        return max(PHASES, key=lambda ph: self._phase_sum(column, ph, warm))

    def device_peak(self) -> int:
        return self._phase_sum("device", self._peak_phase("device"))

    def host_total(self, warm: bool = False) -> int:
        """The host bytes the run's parts hold at their peak phase (beyond what the process holds already);
        ``warm``: a run whose programs come from the compilation cache (no ``compiling`` row)."""
        return self._phase_sum("host", self._peak_phase("host", warm), warm)

    def host_need(self, warm: bool = False) -> int:
        """Everything the host must hold at the run's peak: the parts, the process and (named target) the runtime.
        The refusal takes a first run's figure (``warm`` false), the larger."""
        return self.host_total(warm) + self.process_bytes + (self.runtime_bytes or 0)

    def host_fits(self) -> bool | None:
        if self.host_budget is None:
            return None
        # a local run compares with what is available now: the process and runtime already hold their share
        need = self.host_need() if self.host_label != "available" else self.host_total()
        return need <= self.host_budget

    def largest(self, column: str) -> Row | None:
        phase = self._peak_phase(column)
        rows = [r for r in self.rows if phase in r.phases and getattr(r, column)]
        return max(rows, key=lambda r: getattr(r, column)) if rows else None

    def advice(self, column: str) -> str:
        """Which part does not fit, and the key that shrinks it (never one already set)."""
        row = self.largest(column)
        if row is None:
            return ""
        key = getattr(row, column + "_key")
        fix = f": {key}" if key else ""
        return f"the largest part at that moment is the {row.part} ({_gib(getattr(row, column))}){fix}"

    def refusal(self) -> str:
        """The one-line reason a run stops before reading a weight (its host need exceeds what is available)."""
        return (f"this run needs ~{_gib(self.host_total())} of host memory at its peak beside what the process holds, "
                f"and this machine has {_gib(self.host_budget)} available: {self.advice('host')} "
                "(vidax run --dry-run shows the whole placement)")

    def lines(self, fmt) -> list[str]:
        out = [f"placement:  per device{' of ' + fmt(self.budget) if self.budget else ''}"]
        for r in self.rows:
            amounts = ", ".join(x for x in (f"device {fmt(r.device)}" if r.device else "",
                                            f"host {fmt(r.host)}" if r.host else "") if x) or "-"
            when = "" if r.phases == ("denoise", "decode") or r.phases == PHASES else f" [{'+'.join(r.phases)}]"
            out.append(f"  {r.part:<13} {r.where:<26} {amounts}{when}{'; ' + r.note if r.note else ''}")
        peak, phase = self.device_peak(), self._peak_phase("device")
        if self.budget:
            verdict = ("fits" if peak <= EDGE * self.budget else
                       "at the edge: may not fit (the estimates are good to a few percent); " + self.advice("device")
                       if peak <= self.budget else "does not fit: " + self.advice("device"))
            out.append(f"  peak per device ~{fmt(peak)} ({phase}) of {fmt(self.budget)}: {verdict}")
        else:
            out.append(f"  peak per device ~{fmt(peak)} ({phase}; the device's memory is not known: name one with "
                       "--device)")
        parts = [f"~{fmt(self.host_total())} for the run's parts ({self._peak_phase('host')})",
                 f"~{fmt(self.process_bytes)} the process (Python, JAX)"]
        if self.runtime_bytes:
            parts.append(f"~{fmt(self.runtime_bytes)} the device runtime's own")
        elif self.runtime_bytes is None:
            parts.append("the device runtime's own (not known for this device)")
        line = f"  host memory {' + '.join(parts)} = ~{fmt(self.host_need())}"
        fits = self.host_fits()
        if fits is not None:
            line += (f" of {fmt(self.host_budget)} {self.host_label}: "
                     + ("fits" if fits else "does not fit: " + self.advice("host")))
        if self.host_need(warm=True) < self.host_need():
            line += f"; ~{fmt(self.host_need(warm=True))} with the decode's programs in the compilation cache"
        out.append(line + " (the page cache of the checkpoint files is the OS's)")
        return out


def fmt_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1 (one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.1f} TiB"


def _gib(n: int | None) -> str:
    return fmt_bytes(n or 0)
