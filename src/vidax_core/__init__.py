"""vidax-core: the runtime, plugin hooks, samplers and generic pipeline of the vidax video diffusion engine."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("vidax-core")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"
