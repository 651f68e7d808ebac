"""A denoiser's ``aux`` across offload's jitted stages (vidax_core.parallel.static_aux): Python values (a token
grid) stay Python values per input signature, arrays are traced, and a leaf that is neither is refused in one line.
The offload executor itself is exercised with such an aux by tests/test_contract.py's two-group offload runs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.parallel.static_aux import StaticOutputs, jit_aux, join, split


def test_split_join_round_trip_keeps_python_values():
    aux = {"grid": (3, 4), "name": "video", "mod": jnp.ones((2, 5)), "host": np.zeros(2, np.float32)}
    arrays, static = split(aux)
    assert {v for _, v in static.values} == {3, 4, "video"}
    back = join(arrays, static)
    assert back["grid"] == (3, 4) and back["name"] == "video" and back["mod"] is aux["mod"]


def test_unhashable_leaf_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"aux\['bad'\] is a set.*neither an array nor a hashable constant"):
        split({"bad": {1, 2}, "ok": 1})


def test_stages_see_static_values_per_signature():
    """``pre`` returns a grid from its input's shape; the next stage reshapes with it. Two input shapes in turn:
    each call gets its own grid back, not the last traced one."""
    traces = []

    def pre(w, x):
        traces.append(x.shape)
        return x * w, {"grid": (x.shape[1], x.shape[2]), "scale": w}

    def block(h, aux):
        f, n = aux["grid"]
        return h.reshape(h.shape[0], f * n) * aux["scale"]

    jpre, jblock = StaticOutputs(pre, key_from=1), jit_aux(block, 1)
    w = jnp.float32(2.0)
    for shape in [(1, 2, 3), (1, 3, 4), (1, 2, 3), (1, 3, 4)]:
        x = jnp.ones(shape)
        h, aux = jpre(w, x)
        assert aux["grid"] == shape[1:] and isinstance(aux["grid"][0], int)
        assert jblock(h, aux).shape == (1, shape[1] * shape[2])
    assert traces == [(1, 2, 3), (1, 3, 4)]  # each signature traced once
