"""How much device memory a VAE decode needs beyond its weights: the estimate the dry run prints and the run uses
to tile a decode that would not fit.

A video VAE decoder is a stack of convolutions whose largest activations sit at the output resolution, where its
channel count is the smallest: one program (a causal chunk of frames, a time tile, or the whole video) holds a few
such tensors at once (a conv's input and output, the residual, the norm's statistics). From the VAE's
``config.json``: the output-resolution width (``base_dim x dim_mult[0]`` for the Wan VAEs, else the smallest of
``block_out_channels``), the patch its last layer unfolds (Wan2.2: 2); from the family: the frames one decode
program makes (``ModelSpec.vae_decode_frames``: Wan's causal chunks make 4, CogVideoX's 8, HunyuanVideo's time
tiles 16; None: the whole video at once). Calibrated on the lent TPU v5e: HunyuanVideo-1.5's untiled 480p decode
asked XLA for 133.8 GB (this estimate: 151 GB), a SkyReels-V2 544x960 chunk for 4.99 GB (4.8 GB).

The Wan decoders' chunk program changes regime with size: its temporaries on the v5e were 3.73 GB at 480x832 and
5.16 GB at 544x960 (25 frames), near this estimate, then 17.3, 24.3, 26.9 and 27.4 GB at 600x1024, 720x1152,
704x1280 and 720x1280 (81 frames): linear in the area again, at ~3.2 times the bytes per pixel
(benchmarks/results/2026-12-07-tpu-v5e-b). Past :data:`WAN_LARGE_TENSOR` bytes in one output-resolution tensor
the estimate counts :data:`WAN_LARGE_LIVE` such tensors (a GPU was not measured; the larger figure errs on the
side of tiling).
"""

from __future__ import annotations

from typing import Any, Mapping

LIVE_TENSORS = 6  # float32 tensors of the output-resolution width alive at once, at the decoder's peak
WAN_LARGE_TENSOR = int(0.8 * 2**30)  # between 544x960's 0.75 GiB and 600x1024's 0.88 GiB (4 frames x 96 channels)
WAN_LARGE_LIVE = 20


def output_channels(config: Mapping[str, Any]) -> tuple[int, int]:
    """(channels of the decoder's output-resolution stage, the patch its last layer unfolds)
    from ``vae/config.json``."""
    patch = int(config.get("patch_size") or 1) if isinstance(config.get("patch_size"), int) else 1
    if "base_dim" in config:
        base = int(config.get("decoder_base_dim") or config["base_dim"])
        mult = config.get("dim_mult") or [1]
        return base * int(mult[0]), patch
    for key in ("decoder_block_out_channels", "block_out_channels"):
        chans = config.get(key)
        if isinstance(chans, (list, tuple)) and chans:
            return int(min(chans)), patch
    return 128, patch


def decode_bytes(config: Mapping[str, Any], num_frames: int, height: int, width: int,
                 frames_per_program: int | None = None, tiling: Any = None) -> int:
    """Device bytes one decode program needs beyond the VAE's weights (see the module): for ``tiling`` (a
    :class:`vidax_core.vae.tiling.TilingOptions`, or anything with ``enabled`` and ``tile_sample_min_height`` /
    ``_width``) on, one tile's."""
    channels, patch = output_channels(config)
    frames = num_frames if frames_per_program is None else min(num_frames, frames_per_program)
    if tiling is not None and getattr(tiling, "enabled", False):
        height = min(height, int(getattr(tiling, "tile_sample_min_height", height)))
        width = min(width, int(getattr(tiling, "tile_sample_min_width", width)))
        tile_frames = getattr(tiling, "tile_sample_min_num_frames", None)
        if tile_frames:
            frames = min(frames, int(tile_frames))
    tensor = frames * (height // patch) * (width // patch) * channels * 4
    live = WAN_LARGE_LIVE if "base_dim" in config and tensor > WAN_LARGE_TENSOR else LIVE_TENSORS
    return int(tensor * live)


__all__ = ["LIVE_TENSORS", "WAN_LARGE_LIVE", "WAN_LARGE_TENSOR", "decode_bytes", "output_channels"]
