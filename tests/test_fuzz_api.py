"""Property-based fuzzing of the Python API: ``vidax.load``'s arguments, a loaded pipe's call arguments,
``--prompts`` files, and the sizes every family's denoiser takes.

* ``vidax.load(config, *overrides)`` with any Python objects (the load itself is replaced by a stand-in that
  stops after the config is resolved and checked: no weight is read);
* ``pipe(**kwargs)`` on the tiny Wan pipe with call argument names (real, load-only, misspelt) and values of every
  Python kind (sets, bytes, objects, NaN, huge integers, deep nesting), ``on_progress`` and ``cancel`` of any kind:
  a call either passes every check (it is stopped where it would encode its prompt) or raises one UserError;
* a ``--prompts`` file of drawn text, JSON lines or bytes under drawn extensions, read, planned and every line
  checked as ``vidax run`` checks a batch before loading;
* sizes and frame counts for every family's tiny model: whatever its checks accept, its denoiser takes (the model
  traced abstractly at that grid, ``jax.eval_shape``), and what it cannot take is refused as one line.

The contract (tests/test_fuzz_contract.py): success or one :class:`UserError` line, quickly.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings, report_all
from vidax_core.api import CALL_ARGUMENTS, LOAD_ONLY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "configs", "demo.yaml")
TINY = ("sampling.height=32", "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2",
        "sampling.max_sequence_length=16")
OUTCOMES = {name: Outcomes(name) for name in ("api load", "api call", "prompts files", "sizes")}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    report_all(OUTCOMES.values())


class _Accepted(Exception):
    """Raised by the stand-in where a call or load that passed its checks would start its work."""


def _accepted(fn):
    def run():
        try:
            fn()
        except _Accepted:
            pass
    return run


# ---- Python values of every kind ------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 5, 17, 2**63, -(2**63) - 1, 10**400, 0.5, -0.0, 1e308, 1e-320,
                     math.inf, -math.inf, math.nan, "", "x", "unipc", "mag", "a\0b", "\ud800", "${x}", "~/a.mp4",
                     b"x", bytearray(b"y"), 1j, Ellipsis, object(), {5}, frozenset(), np.float32(1.5), np.int64(3),
                     np.array([1.0]), len, threading.Event()]),
    st.integers(), st.floats(), st.text(max_size=8),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(["method", "threshold", "path", "name", 5])),
                    inner, max_size=4)), max_leaves=12)
PLAUSIBLE = st.fixed_dictionaries({}, optional={
    "prompt": st.text(max_size=20), "negative_prompt": st.one_of(st.text(max_size=8), st.none()),
    "seed": st.one_of(st.integers(0, 2**63 - 1), st.integers()), "num_steps": st.integers(-1, 4),
    "num_frames": st.sampled_from([1, 5, 9, 17, 129, 1025, 4, 0]), "height": st.sampled_from([16, 32, 48, 2048, 33]),
    "width": st.sampled_from([16, 32, 64, 2048, 20]), "guidance_scale": st.sampled_from([0, 1, 5.5, -1, 1e300]),
    "max_sequence_length": st.sampled_from([1, 8, 16, 0, 10**6]), "options": st.sampled_from([{}, {"x": 1}, []]),
    "scheduler": st.sampled_from([None, "unipc", "flow_euler", {"name": "unipc", "flow_shift": 3.0}, "warp"]),
    "cache": st.sampled_from([None, "mag", {"method": "first_block", "threshold": 0.1}, {"method": "teacache"},
                              {"method": {5}}, {"method": "mag", "num_inference_steps": 3}]),
    "vae": st.sampled_from([{}, {"tiling": True}, {"tiling": {"tile_sample_min_height": 16}}, {"tiling": "yes"}]),
})
NAMES = st.one_of(st.sampled_from(list(CALL_ARGUMENTS) + list(LOAD_ONLY) + ["promt", "steps", "fps", "lora_mode"]),
                  st.text(max_size=8))


# ---- vidax.load -------------------------------------------------------------------------------------------------

@settings(**fuzz_settings(default=15))
@given(config=st.one_of(st.just(DEMO), st.just("wan2.1-t2v-1.3b"), SCALARS, st.dictionaries(st.text(max_size=5),
                                                                                              VALUES, max_size=3)),
       overrides=st.lists(st.one_of(st.sampled_from(list(TINY) + ["model.checkpoint=builtin:tiny-random",
                                                                  "sampling.height=2048", "lora=[{path: x}]",
                                                                  "cache={method: {5}}", "prompt=a"]),
                                    SCALARS, st.text(max_size=12)), max_size=4))
def test_api_load_contract(monkeypatch, config, overrides):
    import vidax
    from vidax_core.runner import loaded

    class StandIn:
        def __init__(self, cfg, plugins, reporter=None, **kw):
            from vidax_core.runner.preflight import preflight

            preflight(cfg, plugins.registry.get(cfg.model.id), plugins, check_outputs=False)
            raise _Accepted()

    monkeypatch.setattr(loaded, "LoadedModel", StandIn)
    check_contract(OUTCOMES["api load"], _accepted(lambda: vidax.load(config, *overrides)),
                   label=f"{config!r:.80} {overrides!r:.200}")


# ---- a loaded pipe's calls --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipe():
    import vidax

    p = vidax.load(DEMO, "model.checkpoint=builtin:tiny-random", *TINY)
    yield p
    p.close()


@settings(**fuzz_settings(default=25))
@given(kwargs=st.one_of(PLAUSIBLE, st.dictionaries(NAMES, VALUES, max_size=4)),
       callbacks=st.tuples(*[st.one_of(st.none(), st.none(), st.none(), st.just(print), SCALARS)] * 2))
def test_api_call_contract(pipe, kwargs, callbacks):
    """Every call argument is checked before the call starts: one stopped at its first encode passed them all."""

    def stop(*a, **k):
        raise _Accepted()

    kwargs = {k: v for k, v in kwargs.items() if k not in ("on_progress", "cancel", "self")}
    kwargs.setdefault("prompt", "a fox")
    real = pipe._model._encode_call
    pipe._model._encode_call = stop
    try:
        check_contract(OUTCOMES["api call"], _accepted(lambda: pipe(on_progress=callbacks[0], cancel=callbacks[1],
                                                                    **kwargs)),
                       label=f"{kwargs!r:.250} {callbacks!r:.80}")
    finally:
        pipe._model._encode_call = real


# ---- --prompts files --------------------------------------------------------------------------------------------

LINES = st.one_of(
    st.sampled_from(['{"prompt": "a fox", "seed": 3}', '{"prompt": "b", "num_frames": 1025}', '{"prompt": 5}',
                     '{"prompt": "c", "output": "o.mp4"}', '{"prompt": "d", "output": {"path": "o.mp4"}}',
                     '{"prompt": "e", "options": [1]}', '{"prompt": "f", "cache": {"method": "mag"}}',
                     '{"prompt": "g", "seed": -1}', '{"prompt": "h", "height": 2048}', '{"prompt": "i", "dtype": 1}',
                     '{"promt": "j"}', '[1, 2]', '"just text"', "NaN", "{", "[" * 2000, "# a comment", "",
                     "a plain prompt", "\ufeffbom", "\x00", '{"prompt": "k", "image": "missing.png"}',
                     '{"prompt": "l", "sampling": {"seed": 1}}', '{"prompt": "m", "lora": []}']),
    st.text(max_size=20),
)


@st.composite
def prompts_files(draw):
    ext = draw(st.sampled_from([".txt", ".jsonl", ".JSONL", ".json", ".ndjson", "", ".yaml"]))
    if draw(st.integers(0, 5)) == 0:
        return ext, draw(st.binary(max_size=64))
    lines = draw(st.lists(LINES, max_size=6))
    if ext == ".json" and draw(st.booleans()):
        return ext, ("[" + ", ".join(lines) + "]").encode("utf-8", "surrogatepass")
    return ext, "\n".join(lines).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def batch_model(tmp_path_factory):
    """The tiny Wan model opened as a batch opens it before its lines are checked (no weight read); its output path
    is a fresh one (``make demo`` leaves out/demo.mp4 behind, and an existing output is refused before loading)."""
    from vidax_core import config
    from vidax_core.plugins import get_plugins
    from vidax_core.runner.loaded import LoadedModel
    from vidax_core.report.progress import Reporter

    plugins = get_plugins()
    out = tmp_path_factory.mktemp("batch") / "o.mp4"
    cfg = config.resolve(DEMO, ["model.checkpoint=builtin:tiny-random", f"output.path={out}", *TINY],
                         plugins.preset_for)
    cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, metrics=None))
    model = LoadedModel(cfg, plugins, Reporter(quiet=True), load_weights=False)
    yield cfg, model
    model.close()


@settings(**fuzz_settings(default=8))
@given(file=prompts_files())
def test_prompts_file_contract(tmp_path_factory, batch_model, file):
    from vidax_core.runner import batch

    cfg, model = batch_model
    ext, raw = file
    folder = tmp_path_factory.mktemp("prompts")
    path = str(folder / f"jobs{ext}")
    with open(path, "wb") as f:
        f.write(raw)
    out = dataclasses.replace(cfg.output, path=str(folder / "v.mp4"))

    def read_and_check():
        entries = batch.read_prompts_file(path)
        batch.describe(entries, out)
        batch.check_items(model, batch.plan_items(entries, out))

    check_contract(OUTCOMES["prompts files"], read_and_check, label=f"{ext} {raw[:200]!r}")


# ---- sizes every family's denoiser takes ------------------------------------------------------------------------

FAMILY_CONFIGS = ["demo.yaml", "cosmos_demo.yaml", "cosmos3_demo.yaml", "cogvideox_demo.yaml", "ltx_demo.yaml",
                  "hunyuan_demo.yaml", "hunyuan15_demo.yaml"]
_MODELS: dict = {}


def _model(name: str):
    """The family's tiny model opened without its weights, and an abstract call of its denoiser."""
    if name not in _MODELS:
        from vidax_core import config
        from vidax_core.plugins import get_plugins
        from vidax_core.runner.loaded import LoadedModel
        from vidax_core.report.progress import Reporter

        plugins = get_plugins()
        cfg = config.resolve(os.path.join(ROOT, "configs", name), ["sampling.num_steps=1"], plugins.preset_for)
        cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, metrics=None, path=None))
        _MODELS[name] = LoadedModel(cfg, plugins, Reporter(quiet=True), load_weights=False)
    return _MODELS[name]


def _abstract_call(build, grid, text: int) -> None:
    """``jax.eval_shape`` of one denoiser call at latent ``grid`` (inputs from the build's ``example_inputs``)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.bench.random_dit import _example_inputs

    graphdef, state = nnx.split(nnx.eval_shape(build.ctor))
    if build.example_inputs is None and not any(isinstance(getattr(build.config, n, None), int)
                                                for n in ("text_dim", "context_dim", "text_embed_dim")):
        x, ctx, kw = (tuple(build.latent_shape(1, grid)), "float32"), ((1, text), "int32"), {}  # token ids (Cosmos3)
    else:
        x, ctx, kw = _example_inputs(build, 1, grid, text)

    def spec(tree):
        if isinstance(tree, dict):
            return {k: spec(v) for k, v in tree.items()}
        if isinstance(tree, tuple) and len(tree) == 2 and isinstance(tree[0], tuple):
            return jax.ShapeDtypeStruct(tree[0], jnp.dtype(tree[1]))
        return tree

    t = jax.ShapeDtypeStruct((1,), jnp.float32)
    jax.eval_shape(lambda s, x, t, c, kw: nnx.merge(graphdef, s)(x, t, c, **kw), state, spec(x), t, spec(ctx), spec(kw))


GRID_REFUSALS = ("tokens along the", "which the denoiser's patch")  # vidax_core.runner.grid_check's words


@settings(**fuzz_settings(default=7))
@given(name=st.sampled_from(FAMILY_CONFIGS), key=st.sampled_from(["height", "width", "num_frames"]),
       value=st.one_of(st.integers(1, 4200), st.sampled_from([16, 32, 48, 64, 96, 128, 2048, 4096, 1025, 129, 257])))
def test_sizes_fit_the_denoiser(name, key, value):
    """A size the checks accept is one the denoiser takes: it is traced at that grid without error. And the other
    way: a size refused for the denoiser's own sake (its patch, its position table) is one it cannot take."""
    model = _model(name)

    def plan_and_trace():
        from vidax_core.api import Pipe
        from vidax_core.errors import UserError

        cfg = Pipe(model)._call_config({key: value})
        try:
            plan = model.plan_call(cfg)
        except UserError as exc:
            if any(w in str(exc) for w in GRID_REFUSALS):
                grid = model.plugins.call("vae_latent_shape", model.spec, ckpt=model.ckpt, run=cfg)
                try:
                    _abstract_call(model.builds[0], tuple(grid), int(cfg.sampling.max_sequence_length))
                except Exception:  # noqa: BLE001 - the denoiser cannot take it: rightly refused
                    raise exc from None
                raise AssertionError(f"refused a grid {tuple(grid)} the denoiser takes: {exc}") from None
            raise
        for p, grid in zip(plan.passes, plan.grids):
            if grid is not None:
                _abstract_call(model.builds[0], grid, int(p.run.sampling.max_sequence_length))

    check_contract(OUTCOMES["sizes"], plan_and_trace, label=f"{name} {key}={value}")
