"""Image-to-video input image: loading and the reference's resize, as diffusers' Wan I2V pipelines do it.

* :func:`load_image` is diffusers' ``load_image`` for a local file: open with PIL, apply the EXIF orientation,
  convert to RGB (no alpha compositing). A missing or unreadable file is a one-line :class:`UserError`.
* :func:`fit_size` is the sizing recipe of the ``WanImageToVideoPipeline`` docs: keep the aspect ratio inside
  ``max_area`` pixels, each side a multiple of ``vae_scale_factor * patch_size`` (the pipeline itself floors
  ``height``/``width`` to those multiples).
* :func:`preprocess_image` is ``VideoProcessor.preprocess(image, height, width)`` for a PIL image: sizes floored
  to multiples of the VAE scale factor, a plain PIL Lanczos resize to exactly (width, height) (no crop, aspect
  ratio NOT kept: diffusers' ``resize_mode="default"``), ``/ 255`` in float32, then ``2 x - 1``; returned
  channel-first (1, 3, H, W) like the reference tensor.

The CLIP image encoder (Wan 2.1 I2V) takes the loaded PIL image itself
(:func:`vidax_core.encoders.clip_vision.encode_image`), as the pipeline passes the raw image to its processor.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from vidax_core.errors import UserError


def load_image(path: str | os.PathLike) -> Any:
    """Open a png/jpg (any format PIL reads) as an RGB ``PIL.Image``; one-line UserError if missing/unreadable."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if not os.path.isfile(path):
        raise UserError(f"image not found: {os.fspath(path)!r} — give the path of a png or jpg file")
    try:
        with Image.open(path) as img:
            img = ImageOps.exif_transpose(img)
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"cannot read image {os.fspath(path)!r} ({reason}) — expected a png or jpg file") from None


def fit_size(image: Any, max_area: int, multiple: int) -> tuple[int, int]:
    """(height, width) with the image's aspect ratio, about ``max_area`` pixels, both multiples of ``multiple``.

    The diffusers Wan I2V example: ``round(sqrt(max_area * h / w)) // multiple * multiple`` (and w / h for width).
    """
    aspect = image.height / image.width
    height = round(math.sqrt(max_area * aspect)) // multiple * multiple
    width = round(math.sqrt(max_area / aspect)) // multiple * multiple
    if height < multiple or width < multiple:
        raise UserError(f"image {image.width}x{image.height} is too elongated for max_area={max_area}")
    return height, width


def preprocess_image(image: Any, height: int, width: int, vae_scale_factor: int = 8) -> np.ndarray:
    """``VideoProcessor(vae_scale_factor).preprocess(image, height, width)``: (1, 3, H, W) float32 in [-1, 1].

    Like the reference, ``height``/``width`` are first floored to multiples of ``vae_scale_factor`` (the pipeline's
    ``vae_scale_factor_spatial``: 8 for Wan 2.1, 16 for the Wan 2.2 VAE).
    """
    from PIL import Image

    height, width = height - height % vae_scale_factor, width - width % vae_scale_factor
    if image.size != (width, height):
        image = image.resize((width, height), resample=Image.Resampling.LANCZOS)
    x = np.asarray(image.convert("RGB") if image.mode != "RGB" else image).astype(np.float32) / 255.0
    return np.ascontiguousarray((2.0 * x - 1.0).transpose(2, 0, 1)[None])
