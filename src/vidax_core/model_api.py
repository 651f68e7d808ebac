"""The small contracts between the generic pipeline and a family plugin's components."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

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
    # Mixture of experts over time (Wan2.2 A14B): this denoiser handles model timesteps t_min <= t < t_max and
    # uses the guidance scale named by ``guidance_key`` (a key of the run's ``sampling`` section).
    t_min: float = float("-inf")
    t_max: float = float("inf")
    guidance_key: str = "guidance_scale"

    def active(self, t: float) -> bool:
        return self.t_min <= t < self.t_max


@dataclass(frozen=True)
class Conditioning:
    """Conditioning beyond the text prompt (an image, first-frame latents), from ``prepare_conditioning``.

    ``arrays`` are host arrays with batch 1 handed to the jitted step. ``model_kwargs`` names the entries of
    ``arrays`` passed to the denoiser as keyword arguments (repeated for both guidance halves). ``prepare(x, t,
    arrays)`` maps the sampler's latents and the scalar model timestep to the denoiser's input and timesteps
    ((B,) or per token (B, S)); ``finalize(latents, arrays)`` adjusts the latents after the last step. Both are
    traced jax functions; None means identity / a broadcast scalar timestep.
    """

    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    model_kwargs: tuple[str, ...] = ()
    prepare: Callable[..., tuple[Any, Any]] | None = None
    finalize: Callable[..., Any] | None = None


class OffloadableDit(Protocol):
    """What the block-offload executor needs from a denoiser module (see WanDiT for an implementation)."""

    def pre(self, latents: Any, timestep: Any, context: Any, **kwargs: Any) -> tuple[Any, dict]:
        """Everything before the stacked blocks: returns the hidden state and the per-step aux inputs."""

    @staticmethod
    def run_block_group(name: str, graphdef: Any, state: Any, x: Any, aux: dict) -> Any:
        """Run a slice of the stacked blocks of group ``name`` (``state`` has the leading layer axis)."""

    def post(self, x: Any, aux: dict, latent_shape: Sequence[int]) -> Any:
        """Everything after the blocks: the prediction in the latents' layout."""


class VideoAutoencoder(Protocol):
    """A family's VAE as the pipeline sees it."""

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        """(latent_frames, latent_height, latent_width) for a video of this size."""

    def decode_video(
        self, latents: np.ndarray, on_chunk: Callable[[int, int], None] | None = None, **params: Any
    ) -> np.ndarray:
        """Latents (B, C, F, H, W) -> float32 frames in [0, 1], (B, T, H, W, 3).

        ``on_chunk(done, total)`` after each decoded time chunk. ``params`` condition the decoder where the family's
        VAE takes them (e.g. ``timestep=`` for LTX-Video) and carry run knobs (``tiling=``, ``devices=``); a VAE
        ignores the ones it has no use for.
        """

    def encode_video(
        self, frames: np.ndarray, on_chunk: Callable[[int, int], None] | None = None, **params: Any
    ) -> np.ndarray:
        """Float32 frames in [0, 1], (B, T, H, W, 3) -> latents (B, C, F, H, W) in the DiT's (normalised) space.

        The inverse direction of :meth:`decode_video`, for conditioning on images or clips; same ``params`` rules.
        """
