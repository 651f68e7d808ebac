"""Which keys a call may change and which the load fixes: one table, the config schema's field metadata, read by
the Python API, batch lines and the server's request fields."""

from __future__ import annotations

import dataclasses

from vidax_core import api
from vidax_core.config import RunConfig, SamplingConfig, scope
from vidax_core.serve import request


def test_every_top_level_key_states_its_scope():
    keys = {f.name for f in dataclasses.fields(RunConfig)}
    call, load = set(scope.call_keys()), set(scope.load_keys())
    assert call | load | {"prompts"} == keys and not call & load
    assert {"sampling", "prompt", "image", "options", "cache"} <= call
    assert {"model", "parallel", "offload", "attention", "runtime", "lora_mode"} <= load


def test_the_api_the_batch_and_the_server_read_the_schema():
    assert set(api.SAMPLING_KEYS) == {f.name for f in dataclasses.fields(SamplingConfig)}
    assert set(api.CALL_ARGUMENTS) == (set(scope.call_keys()) - {"sampling"}) | set(api.SAMPLING_KEYS)
    assert not set(api.CALL_ARGUMENTS) & set(api.LOAD_ONLY)
    assert api.LOAD_ONLY["tp"] == "parallel.tp=…" and api.LOAD_ONLY["checkpoint"] == "model.checkpoint=…"
    assert set(request.CALL_KEYS) <= set(api.CALL_ARGUMENTS) and "seed" in request.CALL_KEYS
