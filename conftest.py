"""Repository-wide pytest setup: fp32 matmuls at full precision, one persistent compilation cache for the suite."""

import jax

from vidax_core.testing.cache import use_suite_cache

jax.config.update("jax_default_matmul_precision", "highest")
use_suite_cache()
