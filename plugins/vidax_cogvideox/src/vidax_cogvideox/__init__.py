"""vidax-cogvideox: CogVideoX 1.0 / 1.5 video diffusion models for vidax (hooks in :mod:`vidax_cogvideox.plugin`)."""
