"""Video export: float frames in [0, 1] to an H.264 mp4 (written atomically through :mod:`vidax_core.io.outputs`)."""

from __future__ import annotations

import os
import warnings

import numpy as np

from vidax_core.io import outputs
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


def _ffmpeg_writer(tmp: str, width: int, height: int, fps: int):
    """imageio-ffmpeg's H.264 writer of ``tmp``, primed: ``send`` each uint8 (H, W, 3) frame, then ``close``."""
    import imageio_ffmpeg

    # ffmpeg runs as a child process; the exec follows the fork at once, so JAX's fork warning does not apply
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        gen = imageio_ffmpeg.write_frames(
            tmp, (width, height), fps=fps, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=2,
            output_params=["-f", "mp4"], quality=8,
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
    """An mp4 written as its frames come (a chunked run's windows): :meth:`append` encodes frames into a temporary
    file beside ``path`` at once, :meth:`commit` finishes it and renames it onto ``path``, :meth:`abort` (a failed
    or cancelled run) deletes it, so nothing partial is left under ``path``. A context manager: leaving the block
    by an exception aborts."""

    def __init__(self, path: str, fps: int) -> None:
        self.path, self.fps = path, int(fps)
        self._atomic = outputs.atomic_path(path)
        self._tmp = self._atomic.__enter__()
        self._gen = None
        self.frames = 0
        self.size: tuple[int, int] | None = None

    def append(self, frames: np.ndarray) -> None:
        """Frames (T, H, W, 3) in [0, 1] appended to the video."""
        data = to_uint8(frames)
        if self._gen is None:
            self.size = (data.shape[2], data.shape[1])
            self._gen = _ffmpeg_writer(self._tmp, *self.size, self.fps)
        for frame in data:
            self._gen.send(np.ascontiguousarray(frame))
        self.frames += len(data)

    def commit(self) -> None:
        if self._gen is None:
            raise RuntimeError(f"no frames were written to {self.path}")
        self._gen.close()
        self._gen = None
        _check_written(self._tmp, self.path, self.frames, *self.size, self.fps)
        self._atomic.__exit__(None, None, None)

    def abort(self) -> None:
        if self._gen is not None:
            try:
                self._gen.close()
            except Exception:  # noqa: BLE001 - the file is deleted either way
                pass
            self._gen = None
        self._atomic.__exit__(RuntimeError, RuntimeError("aborted"), None)

    def __enter__(self) -> "Mp4Stream":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is not None:
            self.abort()


def read_mp4(path: str) -> np.ndarray:
    """Read an mp4 back as uint8 (T, H, W, 3) (used by tests and tools)."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    w, h = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]
    return np.stack(frames)
