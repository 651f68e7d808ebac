"""How a run builds its prompt and image encoders: the dtype they compute in, and whether their layers stream.

The runner sets an :class:`EncoderPolicy` around the hooks that build encoders (``build_text_encoder``, and the
image encoders a family builds through ``Checkpoint.model``), so a plugin's loader calls need not change:

* ``dtype``: the run's compute dtype (bfloat16 on an accelerator, float32 on the CPU, ``model.dtype`` when set),
  as the reference pipelines run their encoders when loaded in that dtype. A tower config built without an
  explicit ``dtype`` (``T5Config``, ``ViTConfig``, ``DecoderLLMConfig``, ...) takes it; outside a run, float32.
* ``stream_layers``: when the encoder does not fit the device beside what is placed (:mod:`vidax_core.runner.
  memory_plan`), its stacked layers are streamed from the checkpoint file ``stream_layers`` at a time by the
  offload executor (:mod:`vidax_core.parallel.streamed`); 0 places the whole encoder.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np


@dataclass(frozen=True)
class EncoderPolicy:
    dtype: Any = None  # None: float32
    stream_layers: int = 0


_POLICY: contextvars.ContextVar[EncoderPolicy] = contextvars.ContextVar("vidax_encoder_policy",
                                                                       default=EncoderPolicy())


@contextlib.contextmanager
def encoder_policy(policy: EncoderPolicy) -> Iterator[EncoderPolicy]:
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


def current() -> EncoderPolicy:
    return _POLICY.get()


def default_dtype() -> np.dtype:
    """The dtype a tower config built without an explicit ``dtype`` computes in."""
    d = current().dtype
    return np.dtype(np.float32 if d is None else d)


def resolve_dtype(config: Any) -> None:
    """A frozen tower config's ``dtype`` field: None becomes :func:`default_dtype` (call in ``__post_init__``)."""
    if getattr(config, "dtype", None) is None:
        object.__setattr__(config, "dtype", default_dtype())


def place_tower(graphdef: Any, abstract_state: Any, values: Any, *, put: Any = None, mesh: Any = None,
                rules: Any = None) -> Any:
    """A tower's module from converted ``values``: placed whole (``put`` or ``mesh``, as
    :func:`vidax_core.nn.state.materialize`), or, under a policy that streams, with its stacked layers left in
    the checkpoint and streamed a chunk at a time (:func:`vidax_core.parallel.streamed.stream_stacks`)."""
    import jax
    from flax import nnx

    from vidax_core.nn.state import materialize
    from vidax_core.parallel import sharding

    rules = dict(rules or sharding.ENCODER_RULES)
    if put is None and mesh is not None and mesh.size > 1:
        put = sharding.param_placer(abstract_state, mesh, rules)
    policy = current()
    from vidax_core.io.lazy import checking_only

    if not policy.stream_layers or checking_only():
        return materialize(graphdef, abstract_state, values, put=put)
    from vidax_core.parallel import streamed

    stacks = [p for p, _ in streamed.stacked_modules(nnx.merge(graphdef, abstract_state))]
    inner = put if put is not None else (lambda _p, a: sharding.put(a, None))

    def put_or_keep(path, value):
        return value if any(tuple(path[:len(s)]) == s for s in stacks) else inner(path, value)

    model = materialize(graphdef, abstract_state, values, put=put_or_keep)
    specs = sharding.param_specs(abstract_state, rules, mesh) if mesh is not None and mesh.size > 1 else None
    device = _default_device()

    def shardings_of(path, state):
        from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

        from vidax_core.parallel.host_chunks import key_path

        if specs is None:
            return jax.tree.map(lambda _a: SingleDeviceSharding(device), state)
        return jax.tree_util.tree_map_with_path(
            lambda p, _a: NamedSharding(mesh, specs.get(path + key_path(p), PartitionSpec())), state)

    streamed.stream_stacks(model, policy.stream_layers, shardings_of)
    return model


def _default_device() -> Any:
    """The device an uncommitted array goes to here (``jax.default_device`` respected): the transfer thread of
    the executor does not inherit that context, so streamed chunks name it."""
    import jax.numpy as jnp

    return next(iter(jnp.zeros(()).devices()))


__all__ = ["EncoderPolicy", "current", "default_dtype", "encoder_policy", "place_tower", "resolve_dtype"]
