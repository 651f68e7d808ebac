"""What the Cosmos3 DiT gets beyond the prompt tokens, as ``Cosmos3OmniPipeline`` builds it.

* ``fps`` (1,): the ``fps`` option, for the mRoPE temporal modulation (every task).
* ``noisy_frames`` (1, F): 0 on the conditioning latent frames, 1 elsewhere. The DiT adds the timestep embedding to
  the noisy frames only and returns zero velocity on the others, which is the pipeline's velocity mask; the
  sampler then steps every frame with that velocity (the latents are never rewritten).
* Image-to-video: the preprocessed image (:mod:`vidax_cosmos.cosmos3_image`) repeated over every frame is
  encoded with the VAE's posterior mean and normalised with the VAE's latent mean/std; latent frame 0 is the
  conditioning frame and the initial latents are ``mask * x0 + (1 - mask) * noise``, as the pipeline draws them.
  The Wan VAE is causal in time, so latent frame 0 depends on the first pixel frame alone and vidax encodes only
  that frame.
* Video-to-video: ``options.condition_frame_indexes_vision`` names the clean latent frames. The clip's first (or,
  ``condition_video_keep: last``, last) ``4 max(indexes) + 1`` frames are bilinear-resized (PIL, the pipeline's
  video processor), mapped to [-1, 1], and a shorter clip is padded by repeating its last frame; those latent frames
  of the encoding are the conditioning ones, the others start as noise. The pipeline encodes a full-length tensor
  (the tail padded with the last frame); the causal VAE's latent frames up to ``max(indexes)`` depend on its first
  ``4 max(indexes) + 1`` pixel frames alone, so vidax encodes just those.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.model_api import Conditioning


def image_latents(path: str, vae: Any, height: int, width: int) -> np.ndarray:
    """(1, C, 1, h, w) normalised latents of the conditioning image."""
    from vidax_core.io.image import load_image
    from vidax_core.vae.wan21 import normalize_latents

    from .cosmos3_image import preprocess

    pixels = preprocess(np.asarray(load_image(path), np.uint8), height, width)[None, :, None]
    return normalize_latents(vae.vae.cfg, vae.vae.encode(pixels))[:, :, :1]


def clip_pixels(path: str, height: int, width: int, count: int, keep: str) -> np.ndarray:
    """(1, 3, count, H, W) in [-1, 1]: the clip's first or last ``count`` frames, PIL-bilinear-resized, the last
    one repeated when the clip is shorter."""
    from PIL import Image

    from vidax_core.io.clip import read_video

    frames = read_video(path)
    frames = frames[:count] if keep == "first" else frames[-count:]
    u8 = np.round(frames * np.float32(255.0)).astype(np.uint8)
    out = [np.asarray(Image.fromarray(f).resize((width, height), resample=Image.Resampling.BILINEAR), np.float32)
           for f in u8]
    out += [out[-1]] * (count - len(out))
    x = np.stack(out).transpose(3, 0, 1, 2) / np.float32(255.0)  # (3, T, H, W) in [0, 1]
    return (np.float32(2.0) * x - np.float32(1.0))[None]


def video_latents(run, vae: Any) -> tuple[list[int], np.ndarray]:
    """The clean latent frame indexes and the (1, C, max + 1, h, w) normalised latents they come from."""
    from vidax_core.vae.wan21 import normalize_latents

    s, o = run.sampling, run.options
    indexes = sorted({int(i) for i in o.get("condition_frame_indexes_vision", [0, 1])})
    pixels = clip_pixels(run.video, int(s.height), int(s.width), 4 * indexes[-1] + 1,
                         str(o.get("condition_video_keep", "first")))
    return indexes, normalize_latents(vae.vae.cfg, vae.vae.encode(pixels))


def example_inputs(dit: Any, batch: int, grid, text: int):
    """``DitBuild.example_inputs`` (the same for any config ``dit``): ``text`` prompt token ids per sample (the DiT
    embeds them itself), every latent frame noisy, ``fps`` 24 (the option's default)."""
    kwargs = {"fps": np.full((batch,), 24.0, np.float32), "noisy_frames": np.ones((batch, int(grid[0])), np.float32)}
    return None, ((batch, text), "int32"), kwargs


def prepare(run, vae: Any, grid: tuple[int, int, int]) -> Conditioning:
    f, h, w = grid
    s = run.sampling
    noisy = np.ones((1, f), np.float32)
    arrays = {"fps": np.asarray([float(run.options.get("fps", 24.0))], np.float32), "noisy_frames": noisy}
    latents = None
    if run.image is not None or run.video is not None:
        if run.image is not None:
            indexes, x0 = [0], image_latents(run.image, vae, int(s.height), int(s.width))
        else:
            indexes, x0 = video_latents(run, vae)
        noisy[:, indexes] = 0.0

        def latents(noise):
            out = np.array(noise, np.float32, copy=True)
            out[:, :, indexes] = x0[:, :, indexes]
            return out

    return Conditioning(arrays=arrays, model_kwargs=("fps", "noisy_frames"), latents=latents)
