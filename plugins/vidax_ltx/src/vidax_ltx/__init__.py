"""vidax-ltx: LTX-Video (and LTX-2.x) video diffusion models for vidax (hooks in :mod:`vidax_ltx.plugin`)."""
