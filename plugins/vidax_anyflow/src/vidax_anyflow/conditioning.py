"""AnyFlow's conditioning frames (the pipelines' ``video=``: pre-VAE frames in [0, 1], 4n + 1 of them): an image
(I2V, one frame) or a clip (V2V continuation), VAE-encoded to normalised latents that fill the video's first latent
frames.

* FAR (:mod:`.far`): the frames' chunks are written into the KV cache, not sampled.
* Bidirectional: at every step the first latent frames the model sees are the clip's, at timestep 0 (its target
  timestep ``r`` stays the step's, as in the reference), and the final latents keep them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.errors import UserError
from vidax_core.model_api import Conditioning

TEMPORAL = 4  # the Wan VAE compresses time by 4


def conditioning_frames(run: Any) -> np.ndarray | None:
    """The run's conditioning frames, float32 (1, T, H, W, 3) in [0, 1] at the run's size: ``image`` resized as the
    model cards resize it (PIL's bicubic), or every frame of ``video`` (resized bicubic); None for neither."""
    s = run.sampling
    if run.image is not None:
        from PIL import Image

        from vidax_core.io.image import load_image

        img = load_image(run.image)
        if img.size != (s.width, s.height):
            img = img.resize((s.width, s.height), Image.Resampling.BICUBIC)
        return (np.asarray(img, np.float32) / np.float32(255.0))[None, None]
    if run.video is not None:
        from vidax_core.io.clip import read_video

        return read_video(run.video, height=s.height, width=s.width)[None]
    return None


def given_latent_frames(run: Any) -> int:
    """Latent frames of the run's conditioning (0 without): ``(T - 1) / 4 + 1`` of T frames."""
    frames = conditioning_frames(run) if run.video is not None else None
    if run.image is not None:
        return 1
    if frames is None:
        return 0
    t = frames.shape[1]
    if (t - 1) % TEMPORAL:
        raise UserError(f"video {run.video} has {t} frames: AnyFlow conditions on 4n+1 frames; cut it to "
                        f"{(t - 1) // TEMPORAL * TEMPORAL + 1}")
    return (t - 1) // TEMPORAL + 1


def encode(run: Any, vae: Any) -> np.ndarray:
    """The conditioning frames' normalised latents (1, C, F, h, w) (the VAE posterior's mean)."""
    frames = conditioning_frames(run)
    return np.asarray(vae.encode_video(frames, tiling=run.vae.tiling), np.float32)


def target_timestep(run: Any):
    """``Conditioning.step_kwargs`` of a flow-map step: the model's ``next_timestep`` is the step's target ``r``
    (the plan's next timestep, 0 after the last), or its source with ``options.use_mean_velocity=false``."""
    if dict(run.options or {}).get("use_mean_velocity", True) is False:
        return lambda v: {"next_timestep": v["timestep"]}
    return lambda v: {"next_timestep": v["next_timestep"]}


def bidirectional(run: Any, vae: Any, latent_shape: Any) -> Conditioning:
    """The bidirectional pipeline's conditioning: the target timestep of every step and, with an image or a clip,
    its latents in front of the noisy ones at every step (at timestep 0 per latent frame) and in the final
    latents."""
    step = target_timestep(run)
    if run.image is None and run.video is None:
        return Conditioning(step_kwargs=step)
    given = encode(run, vae)
    frames = int(latent_shape[0])
    n = given.shape[2]
    if n > frames:
        raise UserError(f"the conditioning has {n} latent frames but the video only {frames}: set sampling.num_frames "
                        f"above {(n - 1) * TEMPORAL + 1}")
    context = np.zeros((1, given.shape[1], frames) + given.shape[3:], np.float32)
    context[:, :, :n] = given
    mask = np.zeros((1, 1, frames, 1, 1), np.float32)
    mask[:, :, :n] = 1.0

    def put_back(x, arrays):
        m = arrays["mask"]
        return m * arrays["context"] + (1 - m) * x

    def prepare(x, t, arrays):
        import jax.numpy as jnp

        per_frame = jnp.where(arrays["mask"][0, 0, :, 0, 0] > 0, 0.0, t)[None]
        return put_back(x, arrays), per_frame

    return Conditioning(arrays={"context": context, "mask": mask}, prepare=prepare, finalize=put_back, step_kwargs=step)
