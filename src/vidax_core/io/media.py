"""Pre-run checks of conditioning media (``image:``, ``video:``, and any item a family's options name), so a
broken or hostile file is one :class:`UserError` line before any weight loads.

Images: PIL opens the header and verifies the file's structure; a pixel count above PIL's decompression-bomb
limit (``PIL.Image.MAX_IMAGE_PIXELS``; PIL warns above it and refuses above twice it) is refused with the limit
named. Videos: ffmpeg must report a size and decode a first frame; a ``.npy`` clip (float frames in [0, 1], as
``output.save_frames`` writes them: the lossless hand-off from one run to another) must have a usable header of
shape (T, H, W, 3) or (1, T, H, W, 3).
"""

from __future__ import annotations

import os
import warnings

from vidax_core.errors import UserError
from vidax_core.io.ffmpeg import ffmpeg_module


def bomb_limit() -> int:
    from PIL import Image

    return int(Image.MAX_IMAGE_PIXELS or 0)


def check_image(path: str, where: str = "image") -> None:
    """``path`` is a png/jpg PIL can open and verify, within PIL's pixel limit."""
    try:
        from PIL import Image
    except ImportError:  # the plugin that reads images reports it
        return
    if not os.path.isfile(path):
        raise UserError(f"{where} {path} does not exist or is not a file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.verify()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise UserError(f"{where} {path!r} claims more pixels than PIL's limit of {bomb_limit()} (a decompression "
                        "bomb or a damaged header): give a png or jpg of video size") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a foreign file is "cannot read"
        reason = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise UserError(f"cannot read {where} {path!r} ({reason}) — expected a png or jpg file") from None
    _check_decodes(path, where)


def _check_decodes(path: str, where: str) -> None:
    """``verify`` reads the structure, not the pixels: decode them too (a truncated file fails here)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.load()
    except Exception as exc:  # noqa: BLE001
        reason = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise UserError(f"cannot read {where} {path!r} ({reason}) — expected a png or jpg file") from None


def npy_clip_shape(path: str, where: str = "video") -> tuple[int, int, int]:
    """(frames, height, width) of a ``.npy`` clip, from its checked header alone."""
    from vidax_core.io.noise import npy_header

    h = npy_header(path, f"{where} {path}")
    shape = h.shape[1:] if len(h.shape) == 5 and h.shape[0] == 1 else h.shape
    if len(shape) != 4 or shape[-1] != 3 or h.dtype.kind != "f" or min(shape) < 1:
        raise UserError(f"{where} {path} holds a {h.dtype} array of shape {h.shape}: a .npy clip is float frames in "
                        "[0, 1] of shape (T, H, W, 3) or (1, T, H, W, 3), as output.save_frames writes them")
    if shape[1] * shape[2] > bomb_limit():
        raise UserError(f"{where} {path}: frame size {shape[2]}x{shape[1]} is above the {bomb_limit()}-pixel limit")
    return shape[0], shape[1], shape[2]


def check_video(path: str, where: str = "video") -> None:
    """``path`` is a video ffmpeg can size and decode a first frame of, or a ``.npy`` clip."""
    if not os.path.isfile(path):
        raise UserError(f"{where} {path} does not exist or is not a file")
    if path.endswith(".npy"):
        npy_clip_shape(path, where)
        return
    try:
        imageio_ffmpeg = ffmpeg_module()
    except ImportError:  # the plugin that reads clips reports it
        return
    reader = None
    try:
        with warnings.catch_warnings():  # ffmpeg is a child process: exec follows the fork at once
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            reader = imageio_ffmpeg.read_frames(path)
            meta = next(reader)
            w, h = meta["size"]
            if not (isinstance(w, int) and isinstance(h, int) and 0 < w * h <= bomb_limit()):
                raise ValueError(f"frame size {w}x{h}")
            next(reader)
    except StopIteration:
        raise UserError(f"{where} {path} has no frames: give an mp4 (or any ffmpeg-readable) clip") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a foreign file is "cannot read"
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise UserError(f"{where} {path} cannot be read as a video file ({reason})") from None
    finally:
        if reader is not None:
            reader.close()


def check_medium(path: str, *, video: bool, where: str) -> None:
    """An item that may be a clip or a still (a family's conditioning list): videos by ffmpeg, else PIL."""
    (check_video if video else check_image)(path, where)
