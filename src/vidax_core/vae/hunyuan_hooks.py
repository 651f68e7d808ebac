"""The VAE hooks of a family whose checkpoint's ``vae/`` is diffusers' AutoencoderKLHunyuanVideo: HunyuanVideo and
Kandinsky 5 mix :class:`HunyuanVAEHooks` in before :class:`vidax_core.FamilyPlugin`. Importing it imports no JAX
(registration stays light); the VAE code loads on first use."""

from __future__ import annotations


class HunyuanVAEHooks:
    """``vae_channels_last``: the family's latents are ``(B, F, h, w, C)`` (Kandinsky 5) rather than
    ``(B, C, F, h, w)`` (HunyuanVideo); see :class:`vidax_core.vae.hunyuan_video.HunyuanVideoAutoencoder`."""

    vae_decode_frames = 16  # diffusers' time tiles (tile_sample_min_num_frames) above 16 frames

    vae_channels_last = False
    vae_latent_grid = "vidax_core.vae.hunyuan_video:latent_grid"  # FamilyPlugin.vae_latent_shape reads it

    def build_vae(self, spec, ckpt, run):
        """The checkpoint's VAE, with its encoder only for image-to-video models."""
        from vidax_core.vae.hunyuan_video import load_autoencoder

        return load_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder="i2v" in spec.tasks,
                                channels_last=self.vae_channels_last)
