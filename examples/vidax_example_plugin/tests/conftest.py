"""pytest setup for the plugin's tests, loaded before the test modules.

* float32 matmuls at full precision: the parity test derives its tolerance from the reference's own float32
  error, which assumes XLA computes float32 products in float32 (not in faster reduced-precision passes);
* the package from this checkout when the distribution is not installed: ``src/`` goes on the path of this
  process (pyproject's ``pythonpath`` does that too, but only when pytest runs from this folder) and of the test
  kit's subprocesses, which register the hooks by hand (``plugin_modules`` in test_example_family.py).
"""

import os
import sys
from importlib import metadata

import jax

jax.config.update("jax_default_matmul_precision", "highest")

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
try:
    metadata.distribution("vidax-example-plugin")
except metadata.PackageNotFoundError:
    if SRC not in sys.path:
        sys.path.insert(0, SRC)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))
