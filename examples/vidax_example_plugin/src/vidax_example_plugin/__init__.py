"""vidax-example-plugin: a toy video diffusion family that shows every vidax plugin hook at work."""

__version__ = "0.2.0"
