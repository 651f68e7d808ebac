"""vidax-kandinsky: Kandinsky 5 video diffusion models for vidax (hooks in :mod:`vidax_kandinsky.plugin`)."""

__version__ = "0.1.0"
