"""vidax-motif: Motif-Video (text- and image-to-video) for vidax (hooks in :mod:`vidax_motif.plugin`)."""

__version__ = "0.1.0"
