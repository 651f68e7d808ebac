"""vidax-hunyuan: HunyuanVideo 1.0 (and 1.5) video diffusion models for vidax (hooks in :mod:`vidax_hunyuan.plugin`)."""
