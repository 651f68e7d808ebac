"""Step caching: skip the DiT's block stack on steps whose result its cached residual predicts (MagCache,
TeaCache, FirstBlockCache), identical to diffusers' hooks. The run key is :mod:`vidax_core.config.cache`; see
docs/caching.md. Submodules: ``layout`` (what a family declares), ``schedule`` and ``tables`` (host-side
schedules and published calibrations), ``stack`` (the traced cached stack), ``plan`` and ``run`` (the runner's
side)."""
