"""vidax-wan: the Wan 2.1 / 2.2 video diffusion family for vidax (DiT, VAE, UMT5 prompt encoding, presets)."""
