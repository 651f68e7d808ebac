"""Conditioning images as diffusers' pipelines read them, for every family's image-to-video path.

* :func:`load_image`: diffusers ``load_image`` for a local file (PIL open, EXIF orientation, RGB); a missing or
  unreadable file is a one-line :class:`UserError`.
* :func:`preprocess_image`: ``VideoProcessor(vae_scale_factor).preprocess(image, height, width)`` for a PIL image:
  sizes floored to multiples of ``vae_scale_factor``, a PIL Lanczos resize to exactly (width, height) (aspect
  ratio not kept, diffusers' ``resize_mode="default"``), ``/ 255`` in float32, ``2 x - 1``; (1, 3, H, W).
* :func:`fit_size`: the sizing recipe of diffusers' image-to-video examples: keep the image's aspect ratio inside
  ``max_area`` pixels, each side a multiple of ``multiple`` (VAE factor x patch size).
* :func:`processor_pixels`: a transformers image processor's PIL backend (``preprocessor_config.json``'s size,
  resample, mean and std) on a float frame in [0, 1], as pipelines hand their preprocessed frames to an image
  encoder (Motif-Video's SigLIP).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.ffmpeg import ffmpeg_module


def load_image(path: str | os.PathLike) -> Any:
    """An RGB ``PIL.Image`` from a png/jpg path."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if not os.path.isfile(path):
        raise UserError(f"image not found: {os.fspath(path)!r} — give the path of a png or jpg file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                return ImageOps.exif_transpose(img).convert("RGB")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise UserError(f"image {os.fspath(path)!r} claims more pixels than PIL's limit of {Image.MAX_IMAGE_PIXELS} "
                        "(a decompression bomb or a damaged header): give a png or jpg of video size") from None
    except (UnidentifiedImageError, OSError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"cannot read image {os.fspath(path)!r} ({reason}) — expected a png or jpg file") from None


def preprocess_image(image: Any, height: int, width: int, vae_scale_factor: int = 8,
                     resample: str = "lanczos") -> np.ndarray:
    """(1, 3, H, W) float32 in [-1, 1], as ``VideoProcessor.preprocess`` with its ``resample`` (the default
    processor's lanczos; LTX2ImageToVideoPipeline's is bilinear)."""
    from PIL import Image

    height, width = height - height % vae_scale_factor, width - width % vae_scale_factor
    if image.size != (width, height):
        image = image.resize((width, height), resample=Image.Resampling[resample.upper()])
    x = np.asarray(image if image.mode == "RGB" else image.convert("RGB")).astype(np.float32) / np.float32(255.0)
    return np.ascontiguousarray((np.float32(2.0) * x - np.float32(1.0)).transpose(2, 0, 1)[None])


def resize_crop(image: Any, height: int, width: int) -> Any:
    """The image resized to cover (height, width) (Lanczos, aspect kept, integer division) and centre-cropped, as
    diffusers' ``VideoProcessor.preprocess(..., resize_mode="crop")`` (``_resize_and_crop``) does it."""
    from PIL import Image

    ratio, src_ratio = width / height, image.width / image.height
    src_w = width if ratio > src_ratio else image.width * height // image.height
    src_h = height if ratio <= src_ratio else image.height * width // image.width
    resized = image.resize((src_w, src_h), resample=Image.Resampling.LANCZOS)
    out = Image.new("RGB", (width, height))
    out.paste(resized, box=(width // 2 - src_w // 2, height // 2 - src_h // 2))
    return out


def fit_size(image: Any, max_area: int, multiple: int) -> tuple[int, int]:
    """(height, width): ``round(sqrt(max_area * h / w)) // multiple * multiple`` (and w / h for width)."""
    aspect = image.height / image.width
    height = round(math.sqrt(max_area * aspect)) // multiple * multiple
    width = round(math.sqrt(max_area / aspect)) // multiple * multiple
    if height < multiple or width < multiple:
        raise UserError(f"image {image.width}x{image.height} is too elongated for max_area={max_area}")
    return height, width


def processor_pixels(frame: np.ndarray, processor: dict) -> np.ndarray:
    """(1, 3, S_h, S_w) float32 ``pixel_values`` of a float (3, H, W) frame in [0, 1] through transformers' PIL-backend
    image processor with ``do_rescale=False``: the frame goes to PIL as ``uint8(float32(x * 255))`` (truncated; a
    frame of whole numbers is taken as 0..255 values), is resized to ``size`` with ``resample`` (bicubic by
    default), scaled back by 1/255 and normalised by ``image_mean`` / ``image_std`` (0.5 by default)."""
    from PIL import Image

    size = processor.get("size") or {"height": 224, "width": 224}
    if not isinstance(size, dict) or "height" not in size or "width" not in size:
        raise UserError(f"preprocessor_config.json size={size!r}: vidax reads {{height, width}} sizes")
    if processor.get("do_center_crop"):
        raise UserError("preprocessor_config.json asks for do_center_crop, which vidax does not run for this model")
    x = np.moveaxis(np.asarray(frame, np.float32), 0, -1)
    scaled = not np.allclose(x, x.astype(int))
    u8 = (x.astype(np.float64) * 255).astype(np.float32) if scaled else x
    resample = Image.Resampling(int(processor.get("resample", Image.Resampling.BICUBIC)))
    img = Image.fromarray(u8.astype(np.uint8)).resize((int(size["width"]), int(size["height"])), resample=resample)
    out = np.asarray(img)
    out = (out.astype(np.float64) * (1 / 255)).astype(np.float32) if scaled else out.astype(np.float32)
    mean = np.asarray(processor.get("image_mean", (0.5, 0.5, 0.5)), np.float32)
    std = np.asarray(processor.get("image_std", (0.5, 0.5, 0.5)), np.float32)
    return np.ascontiguousarray(((out - mean) / std).transpose(2, 0, 1)[None]).astype(np.float32)


#: swscale's filter for the colour conversions of :func:`h264_roundtrip` (PyAV's default interpolation).
BILINEAR = ("-sws_flags", "bilinear")


def h264_roundtrip(image: Any, crf: int) -> Any:
    """An RGB ``PIL.Image`` cropped to even sides, compressed as one yuv420p H.264 frame at ``crf`` (libx264, preset
    veryfast) and decoded back, as LTX-2's image conditioning does it before encoding (the compression its models
    were trained on); ``crf`` 0 returns the image unchanged. The RGB <-> YUV conversions use swscale's bilinear
    filter, as PyAV's ``VideoFrame.reformat`` does in the reference (ffmpeg's own default, bicubic, moves most
    pixels by a level or more)."""
    if not crf:
        return image
    import tempfile

    imageio_ffmpeg = ffmpeg_module()
    from PIL import Image

    rgb = np.asarray(image.convert("RGB"), np.uint8)
    h, w = rgb.shape[0] // 2 * 2, rgb.shape[1] // 2 * 2
    rgb = np.ascontiguousarray(rgb[:h, :w])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "frame.mp4")
        with warnings.catch_warnings():  # exec follows the fork at once: JAX's fork warning does not apply
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            gen = imageio_ffmpeg.write_frames(path, (w, h), fps=1, codec="libx264", pix_fmt_out="yuv420p",
                                              macro_block_size=2, quality=None,
                                              output_params=["-crf", str(int(crf)), "-preset", "veryfast",
                                                             *BILINEAR])
            gen.send(None)
            gen.send(rgb)
            gen.close()
            reader = imageio_ffmpeg.read_frames(path, output_params=list(BILINEAR))
            next(reader)  # the metadata
            frame = next(reader)
            reader.close()
    return Image.fromarray(np.frombuffer(frame, np.uint8).reshape(h, w, 3).copy())
