"""Repository-wide pytest setup: shared test helpers on sys.path, fp32 matmuls at full precision."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "testing"))

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
