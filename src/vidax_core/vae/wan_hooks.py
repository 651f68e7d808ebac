"""The VAE hooks of a family whose checkpoint's ``vae/`` is diffusers' AutoencoderKLWan (Wan2.1 or Wan2.2
layout): Wan, Cosmos-Predict2.5 and Cosmos3 mix :class:`WanVAEHooks` in before :class:`vidax_core.FamilyPlugin`.
Importing it imports no JAX (registration stays light); the VAE code loads on first use."""

from __future__ import annotations


class WanVAEHooks:
    vae_decode_frames = 4  # a causal chunk: one latent frame -> four frames
    vae_latent_grid = "vidax_core.vae.wan_video:latent_grid"  # FamilyPlugin.vae_latent_shape reads it

    def build_vae(self, spec, ckpt, run):
        """The checkpoint's Wan VAE, with its encoder only when the run conditions on an image or a clip."""
        from vidax_core.model_api import vae_encodes
        from vidax_core.vae.wan_video import load_wan_autoencoder

        return load_wan_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=vae_encodes(run))
