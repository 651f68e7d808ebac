"""The toy VAE decoder: a 1x1 convolution from latent channels to RGB, then nearest-neighbour upsampling.

It implements the core's :class:`vidax_core.model_api.VideoAutoencoder` protocol: ``latent_shape`` tells the
pipeline how big the latents of a video are, ``decode_video`` turns the final latents into frames in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from jax import ShapeDtypeStruct

from vidax_core import KeyRule, convert, linear

VAE_RULES = [
    # torch Conv2d 1x1 kernel (3, C, 1, 1) -> Linear kernel (C, 3)
    KeyRule(r"decoder\.conv_out\.weight", "conv_out/kernel", lambda w: linear(w.reshape(w.shape[0], -1))),
    KeyRule(r"decoder\.conv_out\.bias", "conv_out/bias"),
]


def checkpoint_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    c, o = config["latent_channels"], config["out_channels"]
    return {"decoder.conv_out.weight": (o, c, 1, 1), "decoder.conv_out.bias": (o,)}


def latent_shape(config: Mapping[str, Any], num_frames: int, height: int, width: int) -> tuple[int, int, int]:
    """(frames, height, width) of the latents of a video: the VAE keeps time and divides space by its factor."""
    s = int(config["scale_factor"])
    return num_frames, height // s, width // s


class UpsampleVAE:
    """A :class:`~vidax_core.model_api.VideoAutoencoder`: latents (B, C, F, H, W) -> frames (B, F, sH, sW, 3)."""

    def __init__(self, config: Mapping[str, Any], tensors: Mapping[str, Any]) -> None:
        self.config, self.scale = dict(config), int(config["scale_factor"])
        c, o = config["latent_channels"], config["out_channels"]
        abstract = {
            ("conv_out", "kernel"): ShapeDtypeStruct((c, o), np.float32),
            ("conv_out", "bias"): ShapeDtypeStruct((o,), np.float32),
        }
        w = convert(tensors, VAE_RULES, abstract, component="vae")
        self.kernel, self.bias = w[("conv_out", "kernel")], w[("conv_out", "bias")]

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return latent_shape(self.config, num_frames, height, width)

    def decode_video(self, latents: np.ndarray, on_chunk: Callable[[int, int], None] | None = None,
                     **params: Any) -> np.ndarray:
        """``params`` carry run knobs other VAEs use (``tiling=``, ``devices=``); this one needs none."""
        latents = np.asarray(latents, np.float32)
        num = latents.shape[2]
        frames = []
        for f in range(num):  # one latent frame per chunk, reported to the progress bar
            rgb = np.einsum("bchw,co->bhwo", latents[:, :, f], self.kernel) + self.bias
            rgb = rgb.repeat(self.scale, axis=1).repeat(self.scale, axis=2)
            frames.append(np.clip((rgb + 1.0) / 2.0, 0.0, 1.0))
            if on_chunk is not None:
                on_chunk(f + 1, num)
        return np.stack(frames, axis=1).astype(np.float32)
