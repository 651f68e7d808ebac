"""The HunyuanVideo VAE as the pipeline sees it moved to :mod:`vidax_core.vae.hunyuan_video`: the core holds it,
since Kandinsky 5 decodes with the HunyuanVideo VAE too. This module keeps the old public names importable; new code
imports the core module."""

from vidax_core.vae.hunyuan_video import *  # noqa: F401,F403
