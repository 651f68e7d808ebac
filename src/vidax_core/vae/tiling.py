"""Tiled, chunked and device-spread execution of a causal video VAE (decode or encode), any family.

A video VAE is run as a grid of *units*: a spatial tile (or the whole frame) of one batch slice. Each unit streams
through time in chunks with its own causal-conv cache (:mod:`vidax_core.vae.causal_conv`); one jitted call per
chunk (the repeated unit), a Python loop over chunks and units. Units are independent, so they are spread round-robin
over the given devices: units of one tile shape are stacked on the batch axis, one per device, and run as one
program sharded over a 1-D device mesh (compiled once, whatever the device count). All units advance chunk by
chunk in lockstep, dispatched asynchronously, and as soon as chunk ``k`` of every unit is back on the host it is
blended into full frames and ``on_chunk(k + 1, chunks)`` fires.

Spatial tiles follow diffusers' ``tiled_decode`` / ``tiled_encode`` (``AutoencoderKLWan``, and the same scheme in
its other video VAEs): tiles start every ``stride`` input pixels and span ``tile`` pixels; in output space each tile
is linearly blended with the tile above and the tile to its left over ``blend`` rows/columns, then cropped to
``stride``. As in the reference, the blend reads neighbours that were already blended (tiles are blended in place,
row by row), and the ramp weights are ``1 - y / blend`` and ``y / blend`` in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vidax_core.report.progress import report_tile, tile_listener

#: One chunk: ``chunk_fn(x_chunk, caches, first, (input placement, weight placement)) -> (output, caches)``;
#: ``caches`` is ``None`` on the first chunk. ``x_chunk`` is a host array (B, t, h, w, C) (a unit group stacked on
#: the batch axis); the output a (device) array (B, t', h', w', C'). A placement is a sharding, a device or None.
#: Under ``pad_tiles`` the chunk function also takes ``area=`` (B, 2) int: each entry's real rows and columns.
ChunkFn = Callable[..., tuple[Any, Any]]


@dataclass(frozen=True)
class TilingOptions:
    """diffusers' ``enable_tiling`` knobs, in sample pixels, with the reference's defaults (tiling off)."""

    enabled: bool = False
    tile_sample_min_height: int = 256
    tile_sample_min_width: int = 256
    tile_sample_stride_height: int = 192
    tile_sample_stride_width: int = 192
    #: AutoencoderKLCogVideoX's knobs: its tiles overlap by a fraction of the tile instead of a stride (None: that
    #: VAE's default). VAEs that tile by stride do not read them.
    tile_overlap_factor_height: float | None = None
    tile_overlap_factor_width: float | None = None

    @classmethod
    def coerce(cls, value: "TilingOptions | Mapping[str, Any] | bool | None") -> "TilingOptions":
        """``None``/``False`` -> off, ``True`` -> on with defaults,
        a mapping -> on unless ``enabled`` says otherwise."""
        if value is None or value is False:
            return cls()
        if value is True:
            return cls(enabled=True)
        if isinstance(value, cls):
            return value
        return parse_knobs(cls, value)

    def check(self) -> None:
        for name in ("tile_sample_min_height", "tile_sample_min_width", "tile_sample_stride_height",
                     "tile_sample_stride_width"):
            knob(name, getattr(self, name), int)
        for name in ("tile_overlap_factor_height", "tile_overlap_factor_width"):
            knob(name, getattr(self, name), float | None)
        by_factor = self.tile_overlap_factor_height is not None or self.tile_overlap_factor_width is not None
        if not by_factor and (self.tile_sample_stride_height > self.tile_sample_min_height
                              or self.tile_sample_stride_width > self.tile_sample_min_width):
            raise ValueError("VAE tiling: a tile stride larger than the tile leaves gaps; lower the stride "
                             "(CogVideoX: set tile_overlap_factor_height/width instead)")


MAX_TILE = 1 << 16  # pixels or frames: larger tiles than any video


def knob(name: str, value: Any, tp: Any) -> Any:
    """``vae.tiling.<name>`` checked against its declared type: true/false, a positive integer (sizes, strides,
    frame counts, at most ``MAX_TILE``) or a fraction in [0, 1) (overlap factors); ValueError naming the key."""
    key = f"vae.tiling.{name}"
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true/false, got {value!r:.40}")
        return value
    if value is None and tp is not int:
        return None
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TILE:
            raise ValueError(f"{key} must be an integer from 1 to {MAX_TILE}, got {value!r:.40}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{key} must be a number in [0, 1), got {value!r:.40}")
    return float(value)


def parse_knobs(cls: type, value: Mapping[str, Any]) -> Any:
    """A mapping of tiling knobs -> ``cls(**knobs)`` (a frozen dataclass declaring a VAE's knobs and their types;
    ``enabled`` defaults to true for a mapping). Unknown keys and wrong types are one ValueError naming the key."""
    import dataclasses
    import typing

    if not isinstance(value, Mapping):
        raise ValueError(f"vae.tiling must be true/false or a mapping of tile knobs, got {value!r:.60}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise ValueError(f"unknown VAE tiling option(s) {unknown}; this VAE's knobs: {known}")
    kw = {k: knob(k, v, hints[k]) for k, v in value.items()}
    kw.setdefault("enabled", True)
    return cls(**kw)


@dataclass(frozen=True)
class TilePlan:
    """Where tiles start and how their outputs are blended, per spatial axis (height, width).

    ``tile`` / ``stride`` are in input pixels, ``out_stride`` / ``out_blend`` / ``out_size`` in output pixels.
    """

    in_size: tuple[int, int]
    tile: tuple[int, int]
    stride: tuple[int, int]
    out_stride: tuple[int, int]
    out_blend: tuple[int, int]
    out_size: tuple[int, int]

    @classmethod
    def whole(cls, in_size: Sequence[int], out_size: Sequence[int]) -> "TilePlan":
        """One tile covering the frame: untiled execution through the same code path."""
        h, w = (int(v) for v in in_size)
        oh, ow = (int(v) for v in out_size)
        return cls((h, w), (h, w), (h, w), (oh, ow), (0, 0), (oh, ow))

    @property
    def rows(self) -> list[int]:
        return list(range(0, self.in_size[0], self.stride[0]))

    @property
    def cols(self) -> list[int]:
        return list(range(0, self.in_size[1], self.stride[1]))

    @property
    def num_tiles(self) -> int:
        return len(self.rows) * len(self.cols)

    def extent(self, row: int, col: int) -> tuple[int, int]:
        """The input rows and columns the tile starting at (``row``, ``col``) really covers (an edge tile is
        smaller than ``tile``)."""
        return min(self.tile[0], self.in_size[0] - row), min(self.tile[1], self.in_size[1] - col)

    def sides_divisible(self, n: int) -> bool:
        """Whether every tile's real rows and columns (an edge tile's too) are multiples of ``n``: a downsampling
        VAE of compression ``n`` then keeps a padded tile's real area whole at every level (``pad_tiles`` exact)."""
        return all(v % n == 0 for i in self.rows for j in self.cols for v in self.extent(i, j))


def blend_v(a: np.ndarray, b: np.ndarray, extent: int) -> np.ndarray:
    """Blend the bottom rows of ``a`` into the top rows of ``b`` in place (axis 2 of (B, T, H, W, C)); returns ``b``."""
    e = min(a.shape[2], b.shape[2], extent)
    if e > 0:
        y = np.arange(e, dtype=np.float64) / e
        wa = (1.0 - y).astype(np.float32)[:, None, None]
        wb = y.astype(np.float32)[:, None, None]
        b[:, :, :e] = a[:, :, a.shape[2] - e:] * wa + b[:, :, :e] * wb
    return b


def blend_h(a: np.ndarray, b: np.ndarray, extent: int) -> np.ndarray:
    """Blend the right columns of ``a`` into the left columns of ``b`` in place (axis 3); returns ``b``."""
    e = min(a.shape[3], b.shape[3], extent)
    if e > 0:
        x = np.arange(e, dtype=np.float64) / e
        wa = (1.0 - x).astype(np.float32)[:, None]
        wb = x.astype(np.float32)[:, None]
        b[:, :, :, :e] = a[:, :, :, a.shape[3] - e:] * wa + b[:, :, :, :e] * wb
    return b


def blend_tiles(grid: Sequence[Sequence[np.ndarray]], plan: TilePlan) -> np.ndarray:
    """Row-major grid of output tiles (B, T, h, w, C) -> blended, cropped frames (B, T, H, W, C), float32."""
    rows = [[np.array(t, np.float32, copy=True) for t in row] for row in grid]
    (bh, bw), (sh, sw) = plan.out_blend, plan.out_stride
    out_rows = []
    for i, row in enumerate(rows):
        out_row = []
        for j, tile in enumerate(row):
            if i > 0:
                blend_v(rows[i - 1][j], tile, bh)
            if j > 0:
                blend_h(row[j - 1], tile, bw)
            out_row.append(tile[:, :, :sh, :sw])
        out_rows.append(np.concatenate(out_row, axis=3))
    return np.concatenate(out_rows, axis=2)[:, :, : plan.out_size[0], : plan.out_size[1]]


def stride_decode_plan(opts: Any, latent_hw: Sequence[int], ratio: int, *, patch: int = 1,
                       check: bool = True) -> TilePlan:
    """diffusers' stride-tiled ``_decode`` / ``tiled_decode`` (Wan, LTX-Video, HunyuanVideo): tiles laid out in
    latents (``tile_sample_* // ratio``), blended and cropped in decoder-output pixels (``tile_sample_* // patch``
    for a patchified VAE); one tile unless tiling is on and the latent exceeds a tile.

    ``opts`` holds :class:`TilingOptions`' ``enabled`` and stride fields; with ``check`` its ``check()`` runs when
    the plan is tiled."""
    r, p = int(ratio), int(patch)
    h, w = (int(v) for v in latent_hw)
    out = (h * r // p, w * r // p)
    mh, mw = opts.tile_sample_min_height, opts.tile_sample_min_width
    sh, sw = opts.tile_sample_stride_height, opts.tile_sample_stride_width
    if not (opts.enabled and (w > mw // r or h > mh // r)):
        return TilePlan.whole((h, w), out)
    if check:
        opts.check()
    return TilePlan((h, w), (mh // r, mw // r), (sh // r, sw // r), (sh // p, sw // p),
                    (mh // p - sh // p, mw // p - sw // p), out)


def stride_encode_plan(opts: Any, pixel_hw: Sequence[int], ratio: int, *, patch: int = 1, check: bool = True,
                       untiled_out: Sequence[int] | None = None) -> TilePlan:
    """diffusers' stride-tiled ``_encode`` / ``tiled_encode``: the on/off test reads the pixel size, tiles
    (``tile_sample_*`` as given) are laid out on the encoder input (for a patchified VAE the patch grid) and
    blended and cropped in latents. ``untiled_out``: the latent size of an untiled encode where it is not the
    input over ``ratio`` (a VAE whose convolutions round up)."""
    p = int(patch)
    r = int(ratio) // p
    h, w = (int(v) for v in pixel_hw)
    hp, wp = h // p, w // p
    out = (hp // r, wp // r)
    mh, mw = opts.tile_sample_min_height, opts.tile_sample_min_width
    sh, sw = opts.tile_sample_stride_height, opts.tile_sample_stride_width
    if not (opts.enabled and (w > mw or h > mh)):
        return TilePlan.whole((hp, wp), tuple(untiled_out) if untiled_out is not None else out)
    if check:
        opts.check()
    return TilePlan((hp, wp), (mh, mw), (sh, sw), (sh // r, sw // r), (mh // r - sh // r, mw // r - sw // r), out)


def placements(devices: Sequence[Any] | None) -> tuple[Any, Any, int]:
    """(sharding of a unit group's inputs, sharding of the weights, group size) for these devices.

    One device or none: plain placement, groups of one. Several: a 1-D mesh; a group stacks one unit per device on
    the batch axis, sharded over the mesh, weights replicated. Each program is then compiled once for all devices.
    """
    devs = list(devices) if devices else []
    if len(devs) <= 1:
        dev = devs[0] if devs else None
        return dev, dev, 1
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(devs), ("units",))
    return NamedSharding(mesh, PartitionSpec("units")), NamedSharding(mesh, PartitionSpec()), len(devs)


def run_tiled(
    x: Any,
    chunk_fn: ChunkFn,
    *,
    plan: TilePlan,
    bounds: Sequence[tuple[int, int]],
    devices: Sequence[Any] | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    finish: Callable[[np.ndarray], np.ndarray] | None = None,
    pad_tiles: bool = False,
) -> np.ndarray:
    """Run ``chunk_fn`` over every (batch slice, tile) unit and time chunk of ``x`` (B, T, H, W, C); blend on host.

    ``bounds``: the time chunks ``[(start, end), ...]`` of the input. ``devices``: with several, units of the same
    tile shape run as one program call, one unit per device (a batch above one splits into per-entry units; at most
    as many devices as units are used; a group short of units is padded with zeros, whose outputs are dropped).
    ``chunk_fn`` gets ``(x_group, caches, first,
    (input placement, weight placement))``. ``finish`` maps each blended chunk (float32) before it is kept.
    ``pad_tiles``: the chunk function masks a padded tile to its real area (``area=``), so edge tiles are padded to
    the tile shape and every tile runs one program. Returns the chunks concatenated on the time axis.
    """
    x = np.asarray(x)
    return TiledStream(x.shape, chunk_fn, plan=plan, devices=devices, finish=finish,
                       pad_tiles=pad_tiles).push(x, bounds, on_chunk, last=True)


class TiledStream:
    """:func:`run_tiled` over an input that arrives in pieces: each :meth:`push` runs the time chunks of one piece
    and returns their blended output, the units' causal caches carried from one piece to the next, so the pieces
    together give exactly what one :func:`run_tiled` over the joined input gives (a long video decoded window by
    window as its latents are made). ``shape``: the input's (B, T, H, W, C); only B, H, W matter.
    ``pad_tiles``: see :func:`run_tiled` (a plan of one tile needs no padding: then no ``area`` is passed)."""

    def __init__(self, shape: Sequence[int], chunk_fn: ChunkFn, *, plan: TilePlan,
                 devices: Sequence[Any] | None = None, finish: Callable[[np.ndarray], np.ndarray] | None = None,
                 pad_tiles: bool = False):
        devs = list(devices) if devices else []
        b = int(shape[0])
        self.batches = [slice(i, i + 1) for i in range(b)] if len(devs) > 1 and b > 1 else [slice(0, b)]
        th, tw = plan.tile
        self.units = [(bs, i, j) for bs in self.batches for i in plan.rows for j in plan.cols]
        self.data, self.weights, self.size = placements(devs[: len(self.units)])  # no device idles on padding
        self.plan, self.pad = plan, pad_tiles and plan.num_tiles > 1
        self.padded = (min(th, plan.in_size[0]), min(tw, plan.in_size[1]))
        by_shape: dict[tuple, list[int]] = {}
        for u, (bs, i, j) in enumerate(self.units):
            unit_shape = (bs.stop - bs.start, *(self.padded if self.pad else self.real(u)))
            by_shape.setdefault(unit_shape, []).append(u)
        self.groups = [m[k : k + self.size] for m in by_shape.values() for k in range(0, len(m), self.size)]
        self.caches: list[Any] = [None] * len(self.groups)
        self.plan, self.chunk_fn, self.finish = plan, chunk_fn, finish
        self.started = False

    def real(self, u: int) -> tuple[int, int]:
        """The rows and columns of the input unit ``u`` really covers (an edge tile is smaller)."""
        _, i, j = self.units[u]
        return self.plan.extent(i, j)

    def _collect(self, outs: list[Any], first: bool = False) -> np.ndarray:
        plan, size = self.plan, self.size
        keep = getattr(self.chunk_fn, "first_frames", None) if first else None  # a one-program first chunk
        tiles: list[np.ndarray] = [None] * len(self.units)  # type: ignore[list-item]
        for members, out in zip(self.groups, outs):
            host = np.asarray(out)
            if keep is not None:
                host = host[:, :keep]
            per = host.shape[0] // max(size, len(members)) if size > 1 else host.shape[0]
            for k, u in enumerate(members):
                tiles[u] = host[k * per : (k + 1) * per]
                if self.pad:  # the padded tile's output cropped to its real area (decode scales up, encode down)
                    (rows, cols), (ph, pw) = self.real(u), self.padded
                    tiles[u] = tiles[u][:, :, : rows * host.shape[2] // ph, : cols * host.shape[3] // pw]
        per_batch = []
        k = 0
        for _ in self.batches:
            grid = []
            for _ in plan.rows:
                grid.append(tiles[k : k + len(plan.cols)])
                k += len(plan.cols)
            per_batch.append(blend_tiles(grid, plan))
        chunk = np.concatenate(per_batch, axis=0) if len(per_batch) > 1 else per_batch[0]
        return self.finish(chunk) if self.finish is not None else chunk

    def push(self, x: Any, bounds: Sequence[tuple[int, int]],
             on_chunk: Callable[[int, int], None] | None = None, *, last: bool = False) -> np.ndarray:
        """Run the time chunks ``bounds`` of this piece ``x`` (B, t, H, W, C); their outputs joined on time.

        Tile by tile: a unit group runs all its chunks before the next group starts, so only one group's causal
        caches are on the device at a time (28 tiles of a 720p frame kept together overflowed the v5e); each
        output comes to the host while the next computes, and a chunk is blended once its last group is in.
        Between pieces the caches of a tiled stream wait in host memory; ``last``: no piece follows (none kept)."""
        import jax

        x = np.asarray(x)
        n, groups, done = len(bounds), len(self.groups), []
        hosts: list[list[Any]] = [[None] * groups for _ in bounds]
        first_piece = not self.started

        def land(c: int, g: int, out: Any) -> None:
            hosts[c][g] = np.asarray(out)
            if g == groups - 1:  # the chunk's last group: the chunk is whole
                done.append(self._collect(hosts[c], first_piece and c == 0))
                hosts[c] = None  # type: ignore[call-overload]
                if on_chunk is not None:
                    on_chunk(len(done), n)

        pending = None  # the previous output comes to host while the next computes
        ticks = _TileTicks(n * groups if self.plan.num_tiles > 1 else 0)  # an untiled decode's bar counts chunks
        for g, members in enumerate(self.groups):
            caches = self.caches[g]
            if groups > 1 and caches is not None:  # kept in host memory since the last piece
                caches = jax.device_put(caches, self.data)
            for c, (s, e) in enumerate(bounds):
                xg, kw = self._inputs(x, members, s, e)
                out, caches = self.chunk_fn(xg, caches, first_piece and c == 0, (self.data, self.weights), **kw)
                if hasattr(out, "copy_to_host_async"):
                    out.copy_to_host_async()
                ticks.issued(out)
                if pending is not None:
                    land(*pending)
                pending = (c, g, out)
            if last:
                caches = None
            elif groups > 1 and caches is not None:
                caches = jax.device_get(caches)
            self.caches[g] = caches
        ticks.finish()
        if pending is not None:
            land(*pending)
        self.started = True
        return np.concatenate(done, axis=1)

    def _inputs(self, x: np.ndarray, members: list[int], s: int, e: int) -> tuple[np.ndarray, dict]:
        """The stacked input of one unit group for the time chunk ``s:e`` (edge tiles padded to the tile shape,
        with their real areas as ``area``; a short group padded with zeros)."""
        th, tw = self.plan.tile
        units = self.units
        parts = [x[units[u][0], s:e, units[u][1] : units[u][1] + th, units[u][2] : units[u][2] + tw] for u in members]
        kw = {}
        if self.pad:
            ph, pw = self.padded
            areas = [np.repeat(np.array([self.real(u)], np.int32), p.shape[0], 0) for u, p in zip(members, parts)]
            parts = [np.pad(p, ((0, 0), (0, 0), (0, ph - p.shape[2]), (0, pw - p.shape[3]), (0, 0))) for p in parts]
        parts += [np.zeros_like(parts[0])] * (self.size - len(parts) if self.size > 1 else 0)
        xg = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        if self.pad:
            areas += [areas[0]] * (len(parts) - len(areas))
            kw["area"] = np.concatenate(areas, axis=0)
        return xg, kw


class _TileTicks:
    """Tile progress as tiles finish (:func:`vidax_core.report.progress.report_tile`): after a tile's program is
    issued, the one before it is waited for and counted; the device has the next one queued meanwhile. Only while a
    progress listener is set (else nothing waits)."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.prev = total, 0, None
        self.on = tile_listener() is not None and total > 1

    def issued(self, out: Any) -> None:
        if self.on:
            self._count()
            self.prev = out

    def _count(self) -> None:
        if self.prev is not None:
            import jax

            jax.block_until_ready(self.prev)
            self.done += 1
            report_tile(self.done, self.total)

    def finish(self) -> None:
        if self.on:
            self._count()
            self.prev = None
