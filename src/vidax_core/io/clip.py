"""Conditioning clips (``video:`` in the run config): read a video file into float frames a plugin can encode."""

from __future__ import annotations

import os
import warnings

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.ffmpeg import ffmpeg_module


def read_video(path: str, *, height: int | None = None, width: int | None = None,
               max_frames: int | None = None) -> np.ndarray:
    """Frames of ``path`` as float32 (T, H, W, 3) in [0, 1]; resized (bicubic) to ``height`` x ``width`` when given;
    only the LAST ``max_frames`` frames when given (video-to-world conditions on the end of the clip). A ``.npy``
    clip (float frames as ``output.save_frames`` writes them) is read as it is, without the 8-bit rounding of a
    video file."""
    imageio_ffmpeg = ffmpeg_module()
    from PIL import Image

    if not os.path.isfile(path):
        raise UserError(f"video {path} does not exist")
    if path.endswith(".npy"):
        return _read_npy(path, height, width, max_frames)
    try:
        with warnings.catch_warnings():  # ffmpeg is a child process: exec follows the fork at once
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            reader = imageio_ffmpeg.read_frames(path)
            meta = next(reader)
        w, h = meta["size"]
        frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]
    except (OSError, RuntimeError, StopIteration, KeyError, ValueError) as exc:
        raise UserError(f"video {path} cannot be read as a video file: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if not frames:
        raise UserError(f"video {path} has no frames")
    if max_frames is not None:
        frames = frames[-max_frames:]
    if height is not None and width is not None and (h, w) != (height, width):
        frames = [np.asarray(Image.fromarray(f).resize((width, height), Image.BICUBIC)) for f in frames]
    return np.stack(frames).astype(np.float32) / 255.0


def _read_npy(path: str, height: int | None, width: int | None, max_frames: int | None) -> np.ndarray:
    from vidax_core.io.media import npy_clip_shape
    from vidax_core.io.noise import finite32, npy_header
    from vidax_core.io.video import resize_frames

    t, h, w = npy_clip_shape(path)
    head = npy_header(path, f"video {path}")
    data = np.memmap(path, dtype=head.dtype, mode="r", offset=head.offset, shape=head.shape,
                     order="F" if head.fortran else "C").reshape(t, h, w, 3)
    if max_frames is not None:
        data = data[-max_frames:]
    frames = np.clip(finite32(data, f"video {path}"), 0.0, 1.0)
    if height is not None and width is not None and (h, w) != (height, width):
        frames = resize_frames(frames[None], height, width)[0]
    return frames
