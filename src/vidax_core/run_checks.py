"""The run checks most families share, as one-line problems for their ``check_run`` hook: a frame count the VAE's
temporal compression accepts, a size its spatial compression times the DiT's patch divides, and a denoiser whose
latent channels are the VAE's."""

from __future__ import annotations

from typing import Any


def frame_count_problems(sampling: Any, step: int, who: str, why: str = "", hint: str = "") -> list[str]:
    """``sampling.num_frames`` (``sampling`` the run's ``sampling`` section, as :func:`size_problems` takes it, or
    the frame count itself) must be ``step * k + 1``; ``why`` says the reason. The message names the nearest such
    count, then ``hint``."""
    num_frames = int(getattr(sampling, "num_frames", sampling))
    if not (num_frames - 1) % step:
        return []
    k = max(-(-(num_frames - 1) // step), 0)  # the nearest valid count above
    reason = f" ({why})" if why else ""
    return [f"sampling.num_frames must be {step}k+1 for {who}{reason}, got {num_frames}: use {step * k + 1}{hint}"]


def size_problems(sampling: Any, multiple: int, who: str) -> list[str]:
    """``sampling.height`` and ``width`` must be multiples of ``multiple``; each message names the size to use."""
    out = []
    for key in ("height", "width"):
        v = getattr(sampling, key)
        if v % multiple:
            out.append(f"sampling.{key} must be a multiple of {multiple} for {who}, got {v}: use "
                       f"{max(multiple, v // multiple * multiple)}")
    return out


def latent_channel_problems(ckpt: Any, channels: int, field: str = "out_channels",
                            where: str = "transformer/config.json") -> list[str]:
    """The denoiser's ``field`` (its latent channels, ``channels``) must be the ``z_dim`` of the checkpoint's
    ``vae/config.json`` (a Wan-style VAE; its default 16 where the config leaves it out). No VAE in the
    checkpoint: nothing to compare."""
    if not ckpt.has("vae"):
        return []
    z_dim = ckpt.config("vae").get("z_dim", 16)
    if channels == z_dim:
        return []
    return [f"{where}: {field}={channels} does not match z_dim={z_dim} of vae/config.json: the two components do "
            "not belong together"]
