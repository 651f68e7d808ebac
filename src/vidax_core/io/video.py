"""Video export: float frames in [0, 1] to an H.264 mp4 (written atomically through :mod:`vidax_core.io.outputs`)."""

from __future__ import annotations

import os
import warnings

import numpy as np

from vidax_core.io import outputs
from vidax_core.io.ffmpeg import ffmpeg_module
from vidax_core.io.outputs import write_atomic


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) floats in [0, 1] -> uint8, rounding like PIL/diffusers' export (x * 255, round)."""
    return np.clip(np.round(np.asarray(frames, np.float32) * 255.0), 0, 255).astype(np.uint8)


def resize_frames(frames: np.ndarray, height: int, width: int, mode: str = "bicubic") -> np.ndarray:
    """(B, T, H, W, 3) floats in [0, 1] -> (B, T, height, width, 3) float32. ``bicubic``: each frame as 8-bit RGB
    resized with PIL's bicubic filter, as a multi-scale recipe's last step does with diffusers' PIL frames, ``/ 255``;
    ``cover_crop``: resolution binning's bilinear cover and centre crop in float (:mod:`vidax_core.binning`)."""
    if mode == "cover_crop":
        from vidax_core.binning import cover_and_crop

        return cover_and_crop(frames, height, width)
    if mode != "bicubic":
        raise ValueError(f"resize mode {mode!r}: expected 'bicubic' or 'cover_crop'")
    from PIL import Image

    frames = np.asarray(frames)
    out = np.empty(frames.shape[:2] + (height, width, 3), np.float32)
    for b in range(frames.shape[0]):
        for t, frame in enumerate(to_uint8(frames[b])):
            img = Image.fromarray(frame).resize((width, height), Image.Resampling.BICUBIC)
            out[b, t] = np.asarray(img, np.float32) / np.float32(255.0)
    return out


#: a fragmented mp4 written frame by frame: an empty ``moov`` first, then one ``moof`` + ``mdat`` per frame as soon as
#: it is encoded (no lookahead, no B-frames), flushed at once, so the file plays at every moment while it grows
FRAGMENTED = ["-movflags", "frag_every_frame+empty_moov+default_base_moof", "-tune", "zerolatency",
              "-flush_packets", "1"]


def _ffmpeg_writer(tmp: str, width: int, height: int, fps: int, fragmented: bool = False):
    """imageio-ffmpeg's H.264 writer of ``tmp``, primed: ``send`` each uint8 (H, W, 3) frame, then ``close``;
    ``fragmented``: a fragmented mp4 that plays while it is written (:data:`FRAGMENTED`)."""
    imageio_ffmpeg = ffmpeg_module()

    # ffmpeg runs as a child process; the exec follows the fork at once, so JAX's fork warning does not apply
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        gen = imageio_ffmpeg.write_frames(
            tmp, (width, height), fps=fps, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=2,
            output_params=["-f", "mp4"] + (FRAGMENTED if fragmented else []), quality=8,
        )
        gen.send(None)
    return gen


def _check_written(tmp: str, path: str, frames: int, width: int, height: int, fps: int) -> None:
    if not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:  # ffmpeg reports some failures only on its stderr
        raise RuntimeError(f"ffmpeg wrote no video for {path} ({frames} frames of {width}x{height} at {fps} fps)")


def write_mp4(path: str, frames: np.ndarray, fps: int) -> None:
    """Write one video (T, H, W, 3) in [0, 1] to ``path`` as yuv420p H.264."""
    data = to_uint8(frames)
    t, h, w, _ = data.shape

    def write(tmp: str) -> None:
        gen = _ffmpeg_writer(tmp, w, h, fps)
        for frame in data:
            gen.send(np.ascontiguousarray(frame))
        gen.close()
        _check_written(tmp, path, t, w, h, fps)

    write_atomic(path, write)


class Mp4Stream:
    """An mp4 written as its frames come (a chunked run's windows): :meth:`append` encodes frames at once,
    :meth:`commit` finishes the file, :meth:`abort` (a failed or cancelled run) deletes it, so nothing partial is
    left under ``path``. A context manager: leaving the block by an exception aborts.

    The frames go to a hidden temporary file beside ``path`` (:func:`vidax_core.io.outputs.atomic_path`: a run
    killed outright leaves it to the next write's sweep), renamed onto ``path`` by :meth:`commit`. ``live``: that
    file is a fragmented mp4 (:data:`FRAGMENTED`) that plays at every moment while it grows (one frame behind the
    last appended: the muxer times a frame by the next one), :attr:`growing` names it. ``in_place``: straight into
    ``path`` (a server's own job file, which it deletes when the job fails); a server streams it as it is written
    (:attr:`written`: the bytes written so far are a playable prefix)."""

    def __init__(self, path: str, fps: int, live: bool = False, in_place: bool = False) -> None:
        self.path, self.fps, self.live = path, int(fps), bool(live or in_place)
        if in_place:
            os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
            if os.path.lexists(path):
                os.unlink(path)
            self._atomic, self._tmp = None, path
        else:
            self._atomic = outputs.atomic_path(path)
            self._tmp = self._atomic.__enter__()
        self._gen = None
        self.frames = 0
        self.done = False
        self.size: tuple[int, int] | None = None

    @property
    def growing(self) -> str:
        """The file the frames are written to now (``path`` itself only ``in_place``)."""
        return self._tmp

    @property
    def written(self) -> int:
        """Bytes of the file so far (0 before the first frame)."""
        try:
            return os.path.getsize(self._tmp)
        except OSError:
            return 0

    def append(self, frames: np.ndarray) -> None:
        """Frames (T, H, W, 3) in [0, 1] appended to the video."""
        data = to_uint8(frames)
        if self._gen is None:
            self.size = (data.shape[2], data.shape[1])
            self._gen = _ffmpeg_writer(self._tmp, *self.size, self.fps, fragmented=self.live)
        for frame in data:
            self._gen.send(np.ascontiguousarray(frame))
        self.frames += len(data)

    def commit(self) -> None:
        if self._gen is None:
            raise RuntimeError(f"no frames were written to {self.path}")
        self._gen.close()
        self._gen = None
        _check_written(self._tmp, self.path, self.frames, *self.size, self.fps)
        if self._atomic is not None:
            self._atomic.__exit__(None, None, None)
        self.done = True

    def abort(self) -> None:
        if self._gen is not None:
            try:
                self._gen.close()
            except Exception:  # noqa: BLE001 - the file is deleted either way
                pass
            self._gen = None
        if self._atomic is not None:
            self._atomic.__exit__(RuntimeError, RuntimeError("aborted"), None)
        elif os.path.lexists(self._tmp):
            os.unlink(self._tmp)
        self.done = True

    def __enter__(self) -> "Mp4Stream":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is not None:
            self.abort()


def read_mp4(path: str) -> np.ndarray:
    """Read an mp4 back as uint8 (T, H, W, 3) (used by tests and tools)."""
    imageio_ffmpeg = ffmpeg_module()

    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    w, h = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]
    return np.stack(frames)
