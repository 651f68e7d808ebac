"""Where a loaded pipe keeps its encoders between calls, and the cache of prompt embeddings.

``runtime.text_encoder`` says where the prompt encoder's weights, and those of the other encoders a family
builds for a call (an image encoder, :class:`KeptModels`), live between calls of one loaded pipe:

* ``host``: after each use its arrays are copied to host memory and their device buffers freed; the next use
  puts them back with the same shardings (no file is read again). The default: on one accelerator an 11 GB
  UMT5 and a 14B DiT need not fit together. Under ``jax.distributed`` an array spread over several processes'
  devices stays on the devices.
* ``device``: the encoder stays on the devices (fastest; needs memory for both).
* ``reload``: the encoder is freed after each use and rebuilt from the checkpoint when next needed.

A single ``vidax run`` uses each encoder once and frees it whatever the setting. Embeddings are cached per prompt
text and encoding-relevant settings (a few dozen entries), so a repeated prompt does not run the encoder at all.
"""

from __future__ import annotations

import contextlib
import gc
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterator

import jax
import numpy as np
from flax import nnx

from vidax_core.parallel import streamed

ENCODER_PLACEMENTS = ("host", "device", "reload")


def _modules(obj: Any, depth: int = 0) -> list[tuple[Any, str, nnx.Module]]:
    """(owner, attribute, module) for every nnx module reachable from ``obj`` through plain attributes, lists,
    tuples and dicts (encoders are small dataclasses holding tokenizers and one or two towers)."""
    found: list[tuple[Any, str, nnx.Module]] = []
    if depth > 3:
        return found
    items: list[tuple[Any, Any]]
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))
    elif hasattr(obj, "__dict__") and not isinstance(obj, nnx.Module):
        items = list(vars(obj).items())
    else:
        return found
    for key, value in items:
        if isinstance(value, nnx.Module):
            found.append((obj, key, value))
        elif isinstance(value, (dict, list)) or (hasattr(value, "__dict__") and not callable(value)):
            found.extend(_modules(value, depth + 1))
    return found


def encoder_dtypes(encoder: Any) -> dict[str, str]:
    """The dtype each tower of an encoder holds its matmul weights in (the floating parameters of two or more
    dimensions, by bytes), keyed by the attribute holding the tower: what a run reports it computed in (an 8-bit
    file's kernels: float8_e4m3fn, which the CPU backend holds as its uint8 bits, :mod:`vidax_core.quant.cpu_bits`)."""
    from vidax_core.quant.cpu_bits import BITS, FLOAT8

    out: dict[str, str] = {}
    for _owner, key, module in _modules(encoder):
        by_dtype: dict[str, int] = {}
        for a in jax.tree.leaves(nnx.state(module)):
            dt = FLOAT8 if np.dtype(a.dtype) == BITS else np.dtype(a.dtype)
            if len(getattr(a, "shape", ())) >= 2 and (dt.kind == "f" or dt.name == "bfloat16" or dt.itemsize == 1):
                by_dtype[dt.name] = by_dtype.get(dt.name, 0) + int(np.prod(a.shape, dtype=np.int64)) * dt.itemsize
        if by_dtype:
            out[str(key)] = max(by_dtype, key=by_dtype.get)
    return out


def _movable(a: Any) -> bool:
    """A device array of numbers this process holds whole. PRNG key arrays, and arrays spread over other
    processes' devices (under ``jax.distributed``), stay where they are: parking those is ``device``."""
    return (isinstance(a, jax.Array) and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key)
            and a.is_fully_addressable)


def _host_copy(a: jax.Array) -> np.ndarray:
    """``a``'s values in memory of their own: on the CPU backend ``np.asarray`` is a view that keeps the (then
    deleted) device array alive, and the array restored from it aliases that view again, so each park and
    restore of a loaded pipe's encoder added a link to a chain of arrays that was never freed."""
    host = np.asarray(a)
    return host if host.flags.owndata else host.copy()


class _Parked:
    """An encoder whose modules' arrays were moved to the host; :meth:`restore` puts them back."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.saved = []
        for owner, key, module in _modules(encoder):
            streams = streamed.detach(module)  # streamed layers stay in the checkpoint; their streams move over
            graphdef, state = nnx.split(module)
            # an array placed without a sharding goes back the same way (committed arrays compile anew)
            shardings = jax.tree.map(lambda a: (a.sharding if getattr(a, "_committed", True) else "default")
                                     if _movable(a) else None, state)
            host = jax.tree.map(lambda a: _host_copy(a) if _movable(a) else a, state)
            for a in jax.tree.leaves(state):
                if _movable(a):
                    a.delete()
            self.saved.append((owner, key, graphdef, host, shardings, streams))
            self._set(owner, key, None)

    @staticmethod
    def _set(owner: Any, key: Any, value: Any) -> None:
        if isinstance(owner, (dict, list)):
            owner[key] = value
        else:
            object.__setattr__(owner, key, value)

    def restore(self) -> Any:
        for owner, key, graphdef, host, shardings, streams in self.saved:
            state = jax.tree.map(lambda a, s: a if s is None else jax.device_put(a) if s == "default"
                                 else jax.device_put(a, s), host, shardings)
            module = nnx.merge(graphdef, state)
            streamed.attach(module, streams)
            self._set(owner, key, module)
        self.saved = []
        return self.encoder


class KeptModel:
    """One model a loaded pipe builds on first use and keeps per ``placement`` between uses (see the module)."""

    def __init__(self, build: Callable[[], Any], placement: str = "host") -> None:
        if placement not in ENCODER_PLACEMENTS:
            raise ValueError(f"text encoder placement must be one of {', '.join(ENCODER_PLACEMENTS)}")
        self._build = build
        self.placement = placement
        self._model: Any = None
        self._parked: _Parked | None = None
        self.builds = 0

    def acquire(self) -> Any:
        """The model, on the devices."""
        if self._parked is not None:
            self._model = self._parked.restore()
            self._parked = None
        if self._model is None:
            self._model = self._build()
            self.builds += 1
        return self._model

    def release(self, *, final: bool = False) -> None:
        """After a use: keep, park on the host, or free the model (``final``: the pipe makes no more calls)."""
        if self._model is None:
            return
        if final or self.placement == "reload":
            self._model = None
            gc.collect()
        elif self.placement == "host":
            self._parked = _Parked(self._model)
            self._model = None

    def close(self) -> None:
        self._model = None
        self._parked = None


class KeptModels:
    """The models a family's hooks build from the checkpoint for a call (Wan2.1 I2V's CLIP image encoder), kept
    between the calls of one loaded pipe as ``runtime.text_encoder`` keeps the prompt encoder. Reached through
    :meth:`vidax_core.io.checkpoint.Checkpoint.model`, which builds and drops when no pipe keeps them."""

    def __init__(self, placement: str = "host") -> None:
        self.placement = placement
        self._kept: dict[str, KeptModel] = {}

    def builds(self, component: str) -> int:
        kept = self._kept.get(component)
        return kept.builds if kept is not None else 0

    @contextlib.contextmanager
    def use(self, component: str, build: Callable[[], Any]) -> Iterator[Any]:
        kept = self._kept.setdefault(component, KeptModel(build, self.placement))
        try:
            yield kept.acquire()
        finally:
            kept.release()

    def close(self) -> None:
        for kept in self._kept.values():
            kept.close()
        self._kept.clear()


class TextEncoders:
    """The prompt encoder of one loaded pipe: built on first use, kept per ``placement``, with an embedding cache."""

    def __init__(self, build: Callable[[], Any], placement: str = "host", cache_size: int = 32) -> None:
        self._kept = KeptModel(build, placement)
        self._cache: OrderedDict[Hashable, Any] = OrderedDict()
        self.cache_size = cache_size
        self.hits = 0

    @property
    def builds(self) -> int:
        return self._kept.builds

    @property
    def placement(self) -> str:
        return self._kept.placement

    def lookup(self, key: Hashable) -> Any | None:
        if key in self._cache:
            self._cache.move_to_end(key)
            self.hits += 1
            return self._cache[key]
        return None

    def store(self, key: Hashable, value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def acquire(self) -> Any:
        """The encoder, on the devices."""
        return self._kept.acquire()

    def release(self, *, final: bool = False) -> None:
        """After a use: keep, park on the host, or free the encoder (``final``: the pipe makes no more calls)."""
        self._kept.release(final=final)

    def close(self) -> None:
        """Drop the encoder, its parked copy and the prompt cache; the closing pipe collects the garbage once."""
        self._kept.close()
        self._cache.clear()
