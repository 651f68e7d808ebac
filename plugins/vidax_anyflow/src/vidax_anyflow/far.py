"""AnyFlow-FAR's chunk-by-chunk run (diffusers ``AnyFlowFARPipeline``) as a causal chunked run of the core
(:mod:`vidax_core.windows`, :mod:`vidax_core.causal`).

The video's latent frames are split into chunks (``chunk_partition``: the transformer config's, 1 + 3 x 6 + 2 for
the released 81 frames). Each chunk is denoised alone, its tokens attending to the chunks before it. What they
see: the ``full_chunk_limit - 1`` most recent chunks at full resolution and every older chunk at the lower
resolution of ``compressed_patch_size`` (4 x 4 latent pixels per token: a quarter of the tokens). The reference
recomputes that whole prefix after every chunk (all older chunks through the model at t = 0, chunk-causally) and
caches its keys and values; the chunk it makes then attends to the cache and to itself.

Here the cache is kept and extended, which gives the same keys and values: a chunk's compressed keys depend only on
the compressed chunks before it (the prefix pass is chunk-causal), so they are computed once, when the chunk drops
out of the recent ones, against the compressed keys already cached; the recent full-resolution chunks (whose keys
change when an older neighbour becomes compressed) are recomputed at every fill, against the compressed cache. A
fill's cost is flat: one chunk at the compressed resolution and ``full_chunk_limit - 1`` at the full one.
``options.use_kv_cache=false`` recomputes the prefix instead, as the reference does (the exact oracle the tests
compare the kept cache with).

The compressed keys live in a ring of ``cache_window`` latent frames (default: the model's trained length, the sum of
its config's ``chunk_partition``): within it the run is the reference's exactly; a longer video keeps the most
recent frames and drops the oldest, so memory and time per chunk stay flat however long the video. RoPE positions
stay absolute (the video may be as long as the model's RoPE table, ``rope_max_seq_len`` latent frames).

Conditioning (I2V from one frame, V2V continuation of a clip): the clip's latents fill the first chunks (the chunk
that holds the clip's last latent frame and those before it; frames of that chunk past the clip stay zero, as in
the reference); those chunks are only written into the cache, not sampled, and are decoded into the video.

Noise: one draw of the whole video's latents (B, C, F, H, W), the pipeline's ``latents=``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vidax_core.causal.kv import CacheSpec, Segment, View
from vidax_core.model_api import Conditioning
from vidax_core.windows import CONTINUE, CacheFill, Window, WindowDone, WindowedSampling, WindowStart

FAR, NEAR = "far", "near"  # the cache's segments: the compressed ring, the recent full-resolution chunks
PAD_TO = 128  # the reference pads a sampling call's tokens (and so its keys) to a multiple of this with zeros


@dataclass(frozen=True)
class Geometry:
    """A FAR run's chunks and cache: ``partition`` (latent frames per chunk), ``limit`` (``full_chunk_limit``),
    tokens per latent frame at full (``tpf``) and compressed (``ctpf``) resolution, the compressed ring's
    ``window`` in latent frames, and ``recompute`` (rebuild the prefix at every fill, as the reference)."""

    partition: tuple[int, ...]
    limit: int
    tpf: int
    ctpf: int
    window: int
    recompute: bool = False

    def __post_init__(self) -> None:
        if self.window < max(self.partition):
            raise ValueError(f"cache_window={self.window} latent frames cannot hold a chunk of {max(self.partition)}")
        if self.recompute and self.window < self.compressed_frames(len(self.partition)):
            raise ValueError("use_kv_cache=false recomputes the whole prefix: cache_window must hold the video's "
                             f"{self.compressed_frames(len(self.partition))} compressed latent frames")

    @property
    def recent(self) -> int:
        """Full-resolution chunks kept beside the one being made."""
        return self.limit - 1

    def start(self, c: int) -> int:
        return int(sum(self.partition[:c]))

    def compressed_frames(self, written: int) -> int:
        """Latent frames compressed once ``written`` chunks are in the cache."""
        return self.start(max(written - self.recent, 0))

    def spec(self, layers: int, heads: int, head_dim: int, dtype: str) -> CacheSpec:
        near = self.recent * max(self.partition) * self.tpf
        return CacheSpec(layers, heads, head_dim, (Segment(FAR, self.window * self.ctpf), Segment(NEAR, near)), dtype)

    def sampling_view(self, c: int) -> View:
        """How chunk ``c``'s steps read the cache (chunks 0..c-1 written): the compressed ring, the recent chunks, the
        reference's zero padding of the chunk's own tokens."""
        far = min(self.compressed_frames(c), self.window) * self.ctpf
        near = (self.start(c) - self.start(max(c - self.recent, 0))) * self.tpf
        new = self.partition[c] * self.tpf
        return View(read=tuple((n, t) for n, t in ((FAR, far), (NEAR, near)) if t), zero_keys=(-new) % PAD_TO)

    def fill(self, c: int) -> tuple[View, tuple[int, ...], tuple[int, int], tuple[int, int]]:
        """The cache write after chunk ``c``: its view, write starts, the compressed chunks' latent frames
        ``(first, end)`` and the full-resolution ones'."""
        written = c + 1
        full = (self.start(max(written - self.recent, 0)), self.start(written))
        full_chunks = range(max(written - self.recent, 0), written)
        if self.recompute:
            comp_chunks = range(0, max(written - self.recent, 0))
            read: tuple = ()
        else:
            comp_chunks = range(written - 1 - self.recent, written - self.recent) if written > self.recent else range(0)
            before = min(self.start(comp_chunks[0]), self.window) * self.ctpf if comp_chunks else 0
            read = ((FAR, before),) if before else ()
        comp = (self.start(comp_chunks[0]), self.start(comp_chunks[-1] + 1)) if comp_chunks else (full[0], full[0])
        blocks = tuple(self.partition[k] * self.ctpf for k in comp_chunks) + tuple(
            self.partition[k] * self.tpf for k in full_chunks)
        n_comp = (comp[1] - comp[0]) * self.ctpf
        writes, starts = [], []
        if comp_chunks and self.recompute:
            writes.append((FAR, n_comp, 0))
            starts.append(0)
        elif comp_chunks:  # frame by frame into the ring: a chunk may wrap around its end
            for f in range(comp[0], comp[1]):
                writes.append((FAR, self.ctpf, (f - comp[0]) * self.ctpf))
                starts.append((f % self.window) * self.ctpf)
        writes.append((NEAR, (full[1] - full[0]) * self.tpf, n_comp))
        starts.append(0)
        return View(read=read, blocks=blocks, write=tuple(writes)), tuple(starts), comp, full


class FarWindows(WindowedSampling):
    """The chunks of one AnyFlow-FAR call (see the module docstring). ``given_frames``: latent frames of the
    conditioning clip (0: text-to-video); ``encode(vae)``: its normalised latents (1, C, F, h, w); ``step_kwargs``:
    the steps' target timestep (:func:`.conditioning.target_timestep`)."""

    decode = CONTINUE

    def __init__(self, geo: Geometry, grid_hw: tuple[int, int], channels: int, cache: CacheSpec, num_steps: int, *,
                 given_frames: int = 0, encode: Callable[[Any], np.ndarray] | None = None,
                 step_kwargs: Callable[[Any], dict] | None = None, first: int = 0,
                 history: np.ndarray | None = None, max_frames: int | None = None) -> None:
        self.geo, self.hw, self.channels, self.cache = geo, tuple(int(v) for v in grid_hw), int(channels), cache
        self.encode, self.step_kwargs, self.first, self.max_frames = encode, step_kwargs, int(first), max_frames
        self.num_steps = int(num_steps)
        total = geo.start(len(geo.partition))
        self.base = geo.start(self.first)  # latent frames made before this call (a continuation's)
        self.shape = (1, self.channels, total - self.base, *self.hw)  # this call's draw and latents
        self.context = next((i + 1 for i in range(len(geo.partition)) if geo.start(i + 1) >= given_frames), 0) \
            if given_frames else 0
        windows = []
        for c in range(self.first, len(geo.partition)):
            steps = 0 if c < self.context else self.num_steps
            view = geo.sampling_view(c) if steps else None
            windows.append(Window((int(geo.partition[c]), *self.hw), steps, (self.shape,) if c == self.first else (),
                                  key=("far", view)))
        self.windows = tuple(windows)
        self.out = np.zeros((1, self.channels, total, *self.hw), np.float32)  # the whole video's latents so far
        if history is not None:
            self.out[:, :, :history.shape[2]] = history
        self.noise: np.ndarray | None = None

    def extend(self, run: Any) -> "FarWindows":
        """The chunks that continue this video by ``run.sampling.num_frames - 1`` frames (chunks of the partition's
        largest size), against the kept cache: the recent chunks' latents carry over, positions stay absolute."""
        from vidax_core.errors import UserError

        from .conditioning import target_timestep

        if self.geo.recompute:
            raise UserError("a run with options.use_kv_cache=false keeps no cache to continue: continue the video "
                            "from its frames (video=...) instead")
        if self.noise is None or len(self.geo.partition) - self.first != len(self.windows):
            raise UserError("the kept run did not complete: there is nothing to continue")
        add = int(run.sampling.num_frames) - 1
        if add < 4 or add % 4:
            raise UserError(f"a continuation adds a whole number of 4-frame groups (the VAE compresses time by 4), "
                            f"got {add} frames: ask for {max(4, add // 4 * 4)}")
        size, latent = max(self.geo.partition), add // 4
        chunks = (size,) * (latent // size) + ((latent % size,) if latent % size else ())
        total = sum(self.geo.partition) + latent
        if self.max_frames is not None and total > self.max_frames:
            raise UserError(f"the continued video would reach {total} latent frames, past the model's RoPE table "
                            f"({self.max_frames}): it cannot be continued further")
        geo = dataclasses.replace(self.geo, partition=tuple(self.geo.partition) + chunks)
        return FarWindows(geo, self.hw, self.channels, self.cache, int(run.sampling.num_steps),
                          step_kwargs=target_timestep(run), first=len(self.geo.partition), history=self.out,
                          max_frames=self.max_frames)

    def prepare(self, vae: Any) -> None:
        if self.encode is not None:
            given = np.asarray(self.encode(vae), np.float32)
            self.out[:, :, :given.shape[2]] = given

    def start(self, k: int, draw: Callable, sampler: Any) -> WindowStart:
        if k == 0:
            self.noise = np.asarray(draw(self.shape), np.float32)
        c = self.first + k
        s, e = self.geo.start(c), self.geo.start(c + 1)
        if c < self.context:
            return WindowStart(self.out[:, :, s:e].copy())
        cond = Conditioning(arrays={"frame_offset": np.asarray([s], np.int32)}, model_kwargs=("frame_offset",),
                            step_kwargs=self.step_kwargs)
        return WindowStart(self.noise[:, :, s - self.base:e - self.base].copy(), sampler, None, cond,
                           cache_view=self.geo.sampling_view(c))

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        c = self.first + k
        s, e = self.geo.start(c), self.geo.start(c + 1)
        self.out[:, :, s:e] = latents
        # the reference writes no cache after the last chunk; a kept run writes it when it is continued
        fill = self._fill(c) if k + 1 < len(self.windows) else None
        return WindowDone(output=latents, decode=latents, cache_fill=fill)

    def pending_fill(self) -> CacheFill | None:
        """The cache write of this call's last chunk, which a continuation runs before its first chunk."""
        return self._fill(len(self.geo.partition) - 1)

    def _fill(self, c: int) -> CacheFill:
        view, starts, comp, full = self.geo.fill(c)
        arrays = {"next_timestep": np.zeros((1,), np.float32), "frame_offset": np.asarray([full[0]], np.int32)}
        if comp[1] > comp[0]:
            arrays.update(compressed=self.out[:, :, comp[0]:comp[1]].copy(),
                          compressed_offset=np.asarray([comp[0]], np.int32))
        return CacheFill(self.out[:, :, full[0]:full[1]].copy(), view, starts, 0.0, arrays)


def partition_for(run: Any, dit: Any) -> tuple[int, ...]:
    """The run's chunk partition: ``options.chunk_partition``, else the config's when it covers the video's latent
    frames, else the config's first chunk followed by chunks of its largest size (the last one what is left)."""
    given = dict(run.options or {}).get("chunk_partition")
    if given:
        return tuple(int(c) for c in given)
    total = (int(run.sampling.num_frames) - 1) // 4 + 1
    part = dit.partition
    if sum(part) == total:
        return tuple(part)
    first, size = min(part[0], total), max(part)
    rest = total - first
    return (first,) + (size,) * (rest // size) + ((rest % size,) if rest % size else ())


def geometry_for(run: Any, dit: Any, latent_hw: tuple[int, int]) -> Geometry:
    """The run's :class:`Geometry` at a latent grid of ``latent_hw``: its partition, the config's chunk limit and
    patch sizes, ``options.cache_window`` (null: the trained length; the whole video with ``use_kv_cache=false``)."""
    o = dict(run.options or {})
    part = partition_for(run, dit)
    h, w = latent_hw
    _, ph, pw = dit.patch_size
    _, ch, cw = dit.compressed_patch_size
    recompute = o.get("use_kv_cache") is False
    window = o.get("cache_window") or (sum(part) if recompute else max(sum(dit.partition), max(part)))
    return Geometry(part, int(dit.full_chunk_limit), (h // ph) * (w // pw), (h // ch) * (w // cw), int(window),
                    recompute)
