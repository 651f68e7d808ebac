"""HunyuanVideo-1.5 image-to-video's image handling, as ``HunyuanVideo15ImageToVideoPipeline`` does it:

* the video size is the bucket of the model's ``target_size`` closest to the image's aspect ratio
  (:func:`vidax_hunyuan.hunyuan15_presets.closest_size`), and the image is resized to cover it (Lanczos, aspect
  kept, integer division as diffusers' ``_resize_and_crop``) and centre-cropped (``resize_mode="crop"``);
* that image goes to the VAE in [-1, 1] and, resized to the SigLIP input size (bicubic, the PIL backend of
  transformers' ``SiglipImageProcessor``), rescaled by 1/255 and normalised by the processor's mean and std, to
  the SigLIP vision tower.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vidax_core.io.image import resize_crop  # noqa: F401  (the pipeline's crop, shared with Kandinsky 6)

from .hunyuan15_presets import closest_size


def video_size(image: Any, target: int) -> tuple[int, int]:
    """(height, width) the pipeline derives from ``image`` (a PIL image) and ``target_size``."""
    return closest_size(image.height, image.width, target)


def siglip_pixels(image: Any, processor: Mapping[str, Any]) -> np.ndarray:
    """(1, 3, S, S) float32 SigLIP input from ``preprocessor_config.json``'s size, mean, std and resample."""
    from PIL import Image

    size = processor.get("size") or {"height": 384, "width": 384}
    h, w = (int(size["height"]), int(size["width"])) if "height" in size else (int(size["shortest_edge"]),) * 2
    resample = Image.Resampling(int(processor.get("resample", Image.Resampling.BICUBIC)))
    x = np.asarray(image.convert("RGB").resize((w, h), resample=resample), np.float64)
    x = x * float(processor.get("rescale_factor", 1 / 255))
    mean = np.asarray(processor.get("image_mean", (0.5, 0.5, 0.5)), np.float64)
    std = np.asarray(processor.get("image_std", (0.5, 0.5, 0.5)), np.float64)
    return np.ascontiguousarray(((x - mean) / std).astype(np.float32).transpose(2, 0, 1)[None])


def vae_frames(image: Any) -> np.ndarray:
    """(1, 1, H, W, 3) float32 frames in [0, 1] of the cropped image (the VAE maps them to 2 x - 1)."""
    return (np.asarray(image.convert("RGB"), np.float32) / np.float32(255.0))[None, None]
