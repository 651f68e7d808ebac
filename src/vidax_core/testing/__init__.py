"""The test kit a family plugin uses (``pip install "vidax-core[testing]"``): declare a tiny checkpoint, get the
core's checks for free, and assert parity with the kit's tolerances.

* :class:`vidax_core.testing.family.FamilyTests` — a pytest mixin: subclass it with a model id and a function that
  writes a tiny checkpoint; it checks that the converted checkpoint fills exactly the model's abstract tree, that
  TP, TP x SP and offload (alone and with SP) equal one device, that TP shards the weights and SP does not, and
  that the plugin's sharding matches a golden table.
* :mod:`~vidax_core.testing.runs` — several configurations of one model in one subprocess on fake CPU devices;
  :mod:`~vidax_core.testing.devices` — any script on fake CPU devices; :mod:`~vidax_core.testing.sharded` — inside
  such a script, a model's weights placed by the plugin's rules and a function run under the mesh.
* :mod:`~vidax_core.testing.parity` — the end-to-end bound (latents and frames within 1e-4 relative L2) and the
  fp32 component bound from both implementations' own fp32 errors (:func:`~vidax_core.testing.parity.fp32_error`).
* :mod:`~vidax_core.testing.cli` — the real ``vidax`` command in a subprocess; ``run_e2e`` runs it with saved
  latents, frames and metrics, ``run_args`` gives a case's arguments, ``overrides`` spells ``key=value`` lists.
* :mod:`~vidax_core.testing.reference` — around the PyTorch reference: seeded random weights, the state dict as
  arrays, the reference in float64 (``reference_in``), a pipeline's final latents and frames
  (``reference_outputs``), the e2e conditioning image, saving a pipeline as a checkpoint folder, the meta-device
  full-size check (``meta_tensors``, ``check_full_size``, ``registered_models``).
* :mod:`~vidax_core.testing.assets` — regenerating the tiny checkpoint a plugin ships (``regenerate_asset``).
* :mod:`~vidax_core.testing.tokenizers` — a tiny T5 (SentencePiece unigram) tokenizer trained in-process.
* :mod:`~vidax_core.testing.cache` — one persistent compilation cache for a whole suite.
* :mod:`~vidax_core.testing.tiny` — tiny reference pipelines of the built-in families (the core's own tests and
  each plugin's); :mod:`~vidax_core.testing.contract_plugin` and :mod:`~vidax_core.testing.toy_groups` — toy
  families for the run contract and the planners.

The names a plugin's tests use are importable from the package itself (``from vidax_core.testing import
FamilyTests, resolve, run_e2e, run_args, rel_l2``), resolved on first use. Importing the kit imports neither
PyTorch nor JAX; pytest is needed by :mod:`~vidax_core.testing.family`, the
reference helpers and the tiny fixtures need the ``test`` extra (torch, diffusers, transformers).
"""

from importlib import import_module as _import_module

# the kit's names a plugin's tests use, importable from ``vidax_core.testing`` (resolved on first use)
_EXPORTS = {
    "FamilyTests": "family", "resolve": "checks", "fp32_tolerance": "parity", "rel_l2": "parity",
    "RUN_BOUND": "parity", "assert_run_matches": "parity", "assert_fp32_parity": "parity", "fp32_error": "parity",
    "move_one_ulp": "parity", "run_e2e": "cli", "run_args": "cli", "overrides": "cli", "vidax": "cli",
    "check_full_size": "reference", "write_test_image": "reference",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vidax_core.testing' has no attribute {name!r}")
    value = getattr(_import_module(f"vidax_core.testing.{module}"), name)
    globals()[name] = value
    return value
