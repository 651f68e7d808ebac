"""Image conditioning for Wan-based DiTs, as the reference image-to-video pipelines build it (Wan2.1 / 2.2, and
SkyReels-V2's SkyReelsV2ImageToVideoPipeline, which is Wan2.1's with its own DiT).

* Wan2.1 I2V and Wan2.2 I2V-A14B: the image, followed by zero frames, is VAE-encoded into first-frame latents.
  A 4-channel mask marks the first (image) frame. Mask + latents are concatenated to the noisy latents on
  channels at every step. Wan2.1 also passes CLIP ViT-H/14 hidden states of the raw image (penultimate layer)
  to the DiT's extra image cross-attention.
* Wan2.2 TI2V-5B (``expand_timesteps``): the first latent frame is replaced by the image's latents before every
  model call and after the last step. Its tokens get timestep 0 (per-token timesteps).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning

from vidax_core.io.image import load_image, preprocess_image
from vidax_core.vae.wan21 import normalize_latents


def first_frame_mask_channels(num_frames: int, lat_f: int, lat_h: int, lat_w: int, temporal: int) -> np.ndarray:
    """The reference's (1, temporal, F, h, w) mask: ones for the image frame (repeated ``temporal`` times)."""
    mask = np.zeros((1, 1, num_frames, lat_h, lat_w), np.float32)
    mask[:, :, 0] = 1.0
    mask = np.concatenate([np.repeat(mask[:, :, :1], temporal, axis=2), mask[:, :, 1:]], axis=2)
    mask = mask.reshape(1, lat_f, temporal, lat_h, lat_w)
    return np.ascontiguousarray(mask.transpose(0, 2, 1, 3, 4))


def _concat_condition(x, t, arrays):
    cond = jnp.broadcast_to(arrays["condition"], (x.shape[0],) + arrays["condition"].shape[1:])
    return jnp.concatenate([x, cond.astype(x.dtype)], axis=1), t


def _make_first_frame_ops(patch_hw: tuple[int, int]):
    ph, pw = patch_hw

    def substitute(latents, arrays):
        m = arrays["mask"]
        return (1.0 - m) * arrays["condition"] + m * latents

    def prepare(x, t, arrays):
        per_token = (arrays["mask"][0, 0][:, ::ph, ::pw] * t).reshape(1, -1)
        return substitute(x, arrays), per_token

    return prepare, substitute


def encode_first_frame(vae: Any, image: Any, run, num_frames: int | None) -> np.ndarray:
    """Normalised VAE latents of the image (followed by ``num_frames - 1`` zero frames when given)."""
    s = run.sampling
    pixels = preprocess_image(image, s.height, s.width, vae.spatial_factor)[:, :, None]  # (1, 3, 1, H, W)
    if num_frames is not None and num_frames > 1:
        zeros = np.zeros(pixels.shape[:2] + (num_frames - 1,) + pixels.shape[3:], np.float32)
        pixels = np.concatenate([pixels, zeros], axis=2)
    return np.asarray(normalize_latents(vae.vae.cfg, vae.vae.encode(pixels)), np.float32)


def clip_image_context(clip: Any, processor_config: dict, image: Any) -> np.ndarray:
    """CLIP ``hidden_states[-2]`` of the raw image, preprocessed as the checkpoint's image_processor says."""
    from vidax_core.encoders.clip_vision import CLIP_MEAN, CLIP_STD, preprocess_images

    size = processor_config.get("size", 224)
    size = size.get("shortest_edge", size.get("height", 224)) if isinstance(size, dict) else size
    crop = processor_config.get("crop_size", size)
    crop = crop.get("height", size) if isinstance(crop, dict) else crop
    pixels = preprocess_images([image], size=int(size), crop=int(crop),
                               mean=processor_config.get("image_mean", CLIP_MEAN),
                               std=processor_config.get("image_std", CLIP_STD))
    return np.asarray(clip.hidden_state(jnp.asarray(pixels), -2), np.float32)


def image_tokens(ckpt: Any, dit_cfg: Any) -> int | None:
    """Image tokens per sample of an I2V DiT with ``image_dim``: the CLIP tower's patches + its class token (FLF2V:
    ``pos_embed_seq_len``, both frames'); None without image attention."""
    if dit_cfg.image_dim is None:
        return None
    if dit_cfg.pos_embed_seq_len:
        return int(dit_cfg.pos_embed_seq_len)
    from vidax_core.encoders.clip_vision import CLIPVisionConfig

    return CLIPVisionConfig.from_config(ckpt.config("image_encoder")).num_patches + 1


def example_inputs(dit_cfg: Any, ckpt: Any, batch: int, grid, text: int):
    """``DitBuild.example_inputs`` of an image-to-video DiT: the noisy latents with the mask + first-frame
    channels concatenated (``in_channels`` in all), the UMT5 context and, with image attention, the CLIP tokens."""
    tokens = image_tokens(ckpt, dit_cfg)
    latents = ((batch, dit_cfg.in_channels, *grid), "float32")
    kwargs = {"image_context": ((batch, tokens, dit_cfg.image_dim), "float32")} if tokens else {}
    return latents, ((batch, text, dit_cfg.text_dim), dit_cfg.dtype), kwargs


def prepare(run, vae: Any, latent_shape, dit_cfg, model_index: dict, clip: Any = None,
            processor_config: dict | None = None) -> Conditioning | None:
    """The Conditioning of one run (None for plain text-to-video)."""
    if run.image is None:
        return None
    image = load_image(run.image)
    lat_f, lat_h, lat_w = latent_shape
    if model_index.get("expand_timesteps"):
        condition = encode_first_frame(vae, image, run, None)
        mask = np.ones((1, 1, lat_f, lat_h, lat_w), np.float32)
        mask[:, :, 0] = 0.0
        prep, finalize = _make_first_frame_ops(tuple(dit_cfg.patch_size[1:]))
        return Conditioning(arrays={"condition": condition, "mask": mask}, prepare=prep, finalize=finalize)
    latents = encode_first_frame(vae, image, run, run.sampling.num_frames)
    mask = first_frame_mask_channels(run.sampling.num_frames, lat_f, lat_h, lat_w, vae.temporal_factor)
    arrays = {"condition": np.concatenate([mask, latents], axis=1)}
    kwargs: tuple[str, ...] = ()
    if clip is not None:
        arrays["image_context"] = clip_image_context(clip, processor_config or {}, image)
        kwargs = ("image_context",)
    return Conditioning(arrays=arrays, model_kwargs=kwargs, prepare=_concat_condition)


def prepare_for_run(run, ckpt, vae: Any, latent_shape, dit_cfg: Any = None) -> Conditioning:
    """The image conditioning of ``run`` from the checkpoint: Wan2.1 I2V adds CLIP image tokens for its extra
    cross-attention (a DiT config with ``image_dim``), Wan2.2 only the first-frame latents. ``dit_cfg``: the DiT's
    parsed config (default: transformer/config.json read as Wan's)."""
    from vidax_core.wan_dit.model import WanDiTConfig

    dit_cfg = dit_cfg if dit_cfg is not None else WanDiTConfig.from_config(ckpt.config("transformer"))
    if dit_cfg.image_dim is None or run.image is None:
        return prepare(run, vae, latent_shape, dit_cfg, ckpt.model_index)
    from vidax_core.encoders.clip_vision import CLIPVisionConfig, load_clip_vision

    def build():
        return load_clip_vision(CLIPVisionConfig.from_config(ckpt.config("image_encoder")),
                                ckpt.tensors("image_encoder"))

    with ckpt.model("image_encoder", build) as clip:  # a loaded pipe keeps it between calls
        return prepare(run, vae, latent_shape, dit_cfg, ckpt.model_index, clip, ckpt.config("image_processor"))
