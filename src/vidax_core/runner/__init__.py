"""Running a call: the loaded model (``loaded``) and its planner (``plan``), the pieces one call runs in order (the
denoiser's build and placement, prompts and kept encoders, each pass's step loop, windowed and causal runs, frame
stages, outputs) and the checks that stop a run with one line (preflight, the latent grid, non-finite numbers, a
device out of memory). Where weights go is :mod:`vidax_core.placement`; what a run reports is
:mod:`vidax_core.report`; step caching is :mod:`vidax_core.cache`."""
