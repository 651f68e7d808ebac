"""The small contracts between the generic pipeline and a family plugin's components."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class DitBuild:
    """How to build a family's denoiser.

    ``ctor()`` constructs the NNX module (called under ``nnx.eval_shape`` for the abstract tree); ``component`` is
    the checkpoint folder its weights come from; ``config`` is the family's frozen architecture config;
    ``in_channels`` the latent channels the sampler works on. For the parallel checks made before weights load:
    ``heads`` (attention heads, split by tp then sp), ``patch_size`` ((pt, ph, pw): video tokens =
    latent F*H*W / (pt*ph*pw)) and ``block_counts`` ({stacked group name: blocks}, split by offload.chunk_size).
    """

    ctor: Callable[[], Any]
    config: Any
    in_channels: int
    component: str = "transformer"
    param_dtype: Any = np.float32
    heads: int | None = None
    patch_size: tuple[int, int, int] | None = None
    block_counts: dict[str, int] | None = None


class VideoAutoencoder(Protocol):
    """A family's VAE as the pipeline sees it."""

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        """(latent_frames, latent_height, latent_width) for a video of this size."""

    def decode_video(self, latents: np.ndarray, on_chunk: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Latents (B, C, F, H, W) -> float32 frames in [0, 1], (B, T, H, W, 3)."""


@dataclass(frozen=True)
class Components:
    """Everything loaded for one run (opaque objects from the plugin's hooks)."""

    text_encoder: Any
    vae: VideoAutoencoder
    extra: Sequence[Any] = ()
