"""No process-global state per pipe: two pipes loaded in one process with different attention backends each trace
with their own, whichever was loaded last (the second load used to switch the first pipe's backend)."""

from __future__ import annotations

import os

import vidax
from vidax_core import attention

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
FAST = ("sampling.num_steps=2", "sampling.height=32", "sampling.width=32", "sampling.num_frames=5",
        "sampling.max_sequence_length=16")


def _backends(out) -> set[str]:
    return {site["backend"] for site in out.metrics["attention_calls"].values()}


def test_two_pipes_keep_their_own_attention_backend():
    before = attention.get_backend()
    with vidax.load(DEMO, *FAST, "attention.backend=xla") as a, \
            vidax.load(DEMO, *FAST, "attention.backend=blockwise") as b:
        first = a(prompt="a fox", seed=0)  # traced after b's load: still a's backend
        second = b(prompt="a fox", seed=0)
    assert _backends(first) == {"xla"}, first.metrics["attention_calls"]
    assert _backends(second) == {"blockwise"}, second.metrics["attention_calls"]
    assert attention.get_backend() == before  # neither load changed the process-wide default
