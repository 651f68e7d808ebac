"""Video export: float frames in [0, 1] to an H.264 mp4 (written atomically through :mod:`vidax_core.io.outputs`)."""

from __future__ import annotations

import os
import warnings

import numpy as np

from vidax_core.io.outputs import write_atomic


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) floats in [0, 1] -> uint8, rounding like PIL/diffusers' export (x * 255, round)."""
    return np.clip(np.round(np.asarray(frames, np.float32) * 255.0), 0, 255).astype(np.uint8)


def resize_frames(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """(B, T, H, W, 3) floats in [0, 1] -> (B, T, height, width, 3): each frame as 8-bit RGB resized with PIL's
    bicubic filter, as a multi-scale recipe's last step does with diffusers' PIL frames; float32 ``/ 255``."""
    from PIL import Image

    frames = np.asarray(frames)
    out = np.empty(frames.shape[:2] + (height, width, 3), np.float32)
    for b in range(frames.shape[0]):
        for t, frame in enumerate(to_uint8(frames[b])):
            img = Image.fromarray(frame).resize((width, height), Image.Resampling.BICUBIC)
            out[b, t] = np.asarray(img, np.float32) / np.float32(255.0)
    return out


def write_mp4(path: str, frames: np.ndarray, fps: int) -> None:
    """Write one video (T, H, W, 3) in [0, 1] to ``path`` as yuv420p H.264."""
    import imageio_ffmpeg

    data = to_uint8(frames)
    t, h, w, _ = data.shape

    def write(tmp: str) -> None:
        # ffmpeg runs as a child process; the exec follows the fork at once, so JAX's fork warning does not apply
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            gen = imageio_ffmpeg.write_frames(
                tmp, (w, h), fps=fps, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=2,
                output_params=["-f", "mp4"], quality=8,
            )
            gen.send(None)
        for frame in data:
            gen.send(np.ascontiguousarray(frame))
        gen.close()
        if not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:  # ffmpeg reports some failures only on its stderr
            raise RuntimeError(f"ffmpeg wrote no video for {path} ({t} frames of {w}x{h} at {fps} fps)")

    write_atomic(path, write)


def read_mp4(path: str) -> np.ndarray:
    """Read an mp4 back as uint8 (T, H, W, 3) (used by tests and tools)."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    w, h = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]
    return np.stack(frames)
