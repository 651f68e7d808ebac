"""The test kit a family plugin uses: declare a tiny checkpoint, get the core's checks for free.

* :class:`vidax_core.testing.family.FamilyTests` — a pytest mixin: subclass it in your plugin's tests, give it a
  model id and a function that writes a tiny checkpoint, and it checks that the converted checkpoint fills exactly
  the model's abstract tree, that TP, SP, TP x SP and offload (alone and with SP) equal one device, and that the
  plugin's sharding matches a golden table.
* :func:`vidax_core.testing.runs.run_many` — run several configurations of one model in a subprocess with fake
  CPU devices and compare their final latents with the first.
* :mod:`vidax_core.testing.checks` — the same checks as plain functions, and tolerances derived from the
  reference's own fp32 error.

Nothing here imports PyTorch; pytest is needed only by :mod:`vidax_core.testing.family`.
"""
