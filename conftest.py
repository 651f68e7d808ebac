"""Repository-wide pytest setup: fp32 matmuls at full precision, one persistent compilation cache for the suite,
fast XLA:CPU code generation for the tiny test programs (inherited by every subprocess), and a module's shared
fixtures kept on one xdist worker, and the objects collection created (torch, diffusers, transformers: half a
million of them) frozen out of the garbage collector, which the runner calls after every run.
The PyTorch references run on one thread: two xdist workers on two cores each
running a multi-threaded torch oversubscribe the cores, and its threads then wait on each other."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported by any test module
# No test reaches the network: a hub lookup fails at once instead of retrying DNS for ~23 s (huggingface_hub reads
# the variable when it is imported, so a test's own setenv comes too late).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from vidax_core.testing.cache import use_suite_cache
from vidax_core.testing.devices import use_fast_cpu_compiles
from vidax_core.testing.grouping import group_shared_fixture_modules, order_for_balance
from vidax_core.testing.timing import register as register_suite_timing
from vidax_core.heap import Refreezer, freeze_imports

use_fast_cpu_compiles()  # before JAX starts its backend

import jax  # noqa: E402 (after XLA_FLAGS is set just above)

jax.config.update("jax_default_matmul_precision", "highest")
use_suite_cache()


def pytest_configure(config):
    config.addinivalue_line("markers", "long: runs for tens of seconds on its own; handed to a worker first")
    register_suite_timing(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_shared_fixture_modules(items)
    order_for_balance(items)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    freeze_imports()


REFREEZER = Refreezer()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    REFREEZER.after()
