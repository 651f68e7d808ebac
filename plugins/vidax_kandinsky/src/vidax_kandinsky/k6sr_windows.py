"""``Kandinsky6SRPipeline`` as a windowed run (:mod:`vidax_core.windows`): one window per DiT call, each a batch
of ``tiles_batch_size`` tiles (:mod:`.k6sr_tiles`) denoised from its own noise draw, decoded and Hann-blended into
the output as it completes (:mod:`.k6sr_autoencoder`).

Before the first window the low-quality tile latents are made once: the clip (``video:``, read at the run's
height and width, the first ``num_frames`` frames) goes to [-1, 1], at ``resolution_scale`` 2.25 it is resized
bilinearly by 1.125, then either the whole clip is K-VAE encoded and each tile's latents cut out and upscaled by
the bank's model for the tiling scale (the checkpoint has a ``latent_upscaler/`` of that scale), or each pixel
tile is resized bilinearly to its trained size and encoded. The K-VAE sees pixels ``(x + 1) 127.5 / 128 - 1``
(its training range), its posterior mean times ``scaling_factor`` is the latent. The encoder and the upscaler
are loaded for this and dropped after it.

Window ``k`` starts from ``sqrt(1 - s^2) lq + s noise_k`` (``s`` = ``options.lq_noise_scale``; ``noise_k``
channel-last (tiles, frames, h, w, C), the pipeline's draw order); the DiT's input is that latent with zero
anchor channels and a zero anchor mask (the released checkpoints are anchor-free). ``output.save_latents``
writes every tile's final latents, (tiles, C, frames, h, w), as the pipeline hands them to its decoder.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from vidax_core import Conditioning
from vidax_core.windows import CONTINUE, Window, WindowDone, WindowedSampling, WindowStart

from .k6sr_tiles import TileGeometry, bilinear_matrix, chunks


def _with_anchor(x, t, arrays):
    import jax.numpy as jnp

    return jnp.concatenate([x, jnp.zeros_like(x), jnp.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1), t


def resize_bilinear(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """(..., H, W, 3) float32 resized as torch's bilinear ``interpolate`` (``align_corners=False``) resizes."""
    h, w = frames.shape[-3:-1]
    if (h, w) == (height, width):
        return frames
    rows, cols = bilinear_matrix(h, height), bilinear_matrix(w, width)
    return np.einsum("ih,...hwc,jw->...ijc", rows, frames, cols, optimize=True).astype(np.float32)


@functools.cache
def _programs():
    """The jitted K-VAE encode and upscale (one per process: a pipe's later calls reuse their compiled programs)."""
    import jax

    encode = jax.jit(lambda m, x: m.encode_mean((x + 1.0) * (127.5 / 128.0) - 1.0))
    return encode, jax.jit(lambda m, z: m(z))


def low_quality_tiles(run: Any, ckpt: Any, geom: TileGeometry, vae_cfg: Any) -> np.ndarray:
    """The scaled low-quality latents of every tile, channel-last (tiles, frames, h, w, C) (module docstring). The
    encoder and the upscaler come through ``ckpt.model``: built for this and dropped, or kept by a loaded pipe."""
    from vidax_core.errors import UserError
    from vidax_core.io.clip import read_video

    from .k6sr_upscaler import Kandinsky6SRUpscalerConfig, load_upscaler
    from .k6sr_vae import load_kvae

    s = run.sampling
    frames = read_video(run.video, height=s.height, width=s.width)
    if frames.shape[0] < s.num_frames:
        raise UserError(f"video {run.video} has {frames.shape[0]} frames, sampling.num_frames={s.num_frames}: set "
                        f"it to the clip's length (4k + 1 frames)")
    pixels = frames[None, :s.num_frames] * np.float32(2.0) - np.float32(1.0)  # (1, T, H, W, 3) in [-1, 1]
    pixels = resize_bilinear(pixels, *geom.size)
    encode, upscale = _programs()
    sf = np.float32(vae_cfg.scaling_factor)
    (th, tw), snap = geom.tile, geom.snap
    up_cfg = None
    if ckpt.has("latent_upscaler"):
        up_cfg = Kandinsky6SRUpscalerConfig.from_config(ckpt.config("latent_upscaler"), dtype=vae_cfg.dtype)
    with ckpt.model("vae_encoder", lambda: load_kvae(vae_cfg, ckpt.tensors("vae"), with_decoder=False)) as vae:
        if up_cfg is None or geom.scale not in up_cfg.scales:
            return np.concatenate([np.asarray(encode(vae, resize_bilinear(pixels[:, :, top:top + th, left:left + tw],
                                                                          *geom.base))) * sf
                                   for top, left in geom.positions], axis=0).astype(np.float32)
        latents = np.asarray(encode(vae, pixels)) * sf
    build = lambda: load_upscaler(up_cfg, ckpt.tensors("latent_upscaler"), geom.scale)  # noqa: E731
    with ckpt.model(f"latent_upscaler_x{geom.scale}", build) as upscaler:
        tiles = [np.asarray(upscale(upscaler, latents[:, :, top // snap:(top + th) // snap,
                                                      left // snap:(left + tw) // snap]))
                 for top, left in geom.positions]
    return np.concatenate(tiles, axis=0).astype(np.float32)


class TileWindows(WindowedSampling):
    """The windows of one SR run (module docstring); ``dtype`` the DiT's (the pipeline mixes the noise in it)."""

    decode = CONTINUE
    output_axis = 0

    def __init__(self, run: Any, ckpt: Any, geom: TileGeometry, vae_cfg: Any, dtype: Any = np.float32):
        o = run.options
        self.run, self.ckpt, self.geom, self.vae_cfg = run, ckpt, geom, vae_cfg
        self.noise_scale = float(o.get("lq_noise_scale", 0.7))
        self.steps = int(run.sampling.num_steps)
        self.dtype = np.dtype(dtype)
        self.groups = chunks(geom.count, int(o.get("tiles_batch_size", 1)))
        f, h, w = geom.latent_grid
        c = vae_cfg.latent_channels
        self.windows = [Window(grid=geom.latent_grid, num_steps=self.steps, draws=((len(g), f, h, w, c),),
                               key=len(g)) for g in self.groups]
        self._lq: np.ndarray | None = None

    def start(self, k: int, draw, sampler) -> WindowStart:
        if self._lq is None:
            self._lq = low_quality_tiles(self.run, self.ckpt, self.geom, self.vae_cfg)
        lq = self._lq[self.groups[k].start:self.groups[k].stop].astype(self.dtype)
        noise = draw(self.windows[k].draws[0]).astype(self.dtype)
        s = self.noise_scale
        latents = (np.float32(math.sqrt(1.0 - s * s)) * lq + np.float32(s) * noise).astype(self.dtype)
        return WindowStart(latents=latents.astype(np.float32), sampler=sampler, plan=sampler.plan(self.steps),
                           conditioning=Conditioning(prepare=_with_anchor))

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        out = np.ascontiguousarray(np.moveaxis(latents, -1, 1))  # (tiles, C, frames, h, w)
        if k == len(self.windows) - 1:
            self._lq = None
        return WindowDone(output=out, decode=out)
