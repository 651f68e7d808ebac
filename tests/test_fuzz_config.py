"""Property-based fuzzing of the config layer: ``key=value`` overrides and YAML files, through resolution,
validation and the pre-run checks (everything that runs before a checkpoint is opened).

Keys are drawn from the real config keys (plus misspelt and malformed ones); values from YAML snippets that
break parsers, huge and non-finite numbers, text with control characters, ``${...}`` interpolations and
mismatched containers. The contract (``test_fuzz_contract.check_contract``): a valid
:class:`~vidax_core.config.RunConfig` or one :class:`UserError` line, quickly. For valid configs two more
properties hold: prompts and paths are exactly the text given (never interpolated), and every sampler option
and float is finite. A sample of inputs also goes through ``vidax run --dry-run`` in-process (exit 0 or 2 with
one ``error:`` line).
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings
from vidax_core import cli, config
from vidax_core.plugins import get_plugins
from vidax_core.runner.preflight import preflight
from vidax_core.testing.cache import suite_cache_dir


def _keys(cls, prefix=""):
    out = []
    for f in dataclasses.fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(tp):
            out.append(prefix + f.name)
            out += _keys(tp, prefix + f.name + ".")
        else:
            out.append(prefix + f.name)
    return out


KEYS = [k for k in _keys(config.RunConfig) if k not in ("model.id", "model.checkpoint")]
BAD_KEYS = ["sampling.stepz", "promt", "sampling..num_steps", ".x", "a b", "sampling.scheduler.name", "model",
            "output.path.x", "é", "sampling.\nx", "=", ""]
MODEL_IDS = ["wan2.1-t2v-1.3b", "wan2.1-i2v-14b-480p", "wan2.2-ti2v-5b", "wan2.2-t2v-a14b"]
SNIPPETS = ["[1", "[1,2", "{a: 1}", "[1]", "{", "}", "&", "&a", "*a", "'", '"', "|", ">", "!!python/object:os.system",
            "!!binary 0", "null", "~", "", "true", "0x10", "1_000", "0o7", ".inf", "-.inf", ".nan", "1e400", "-0",
            "=", "==", "\x7f", "\x00", "a\nb", "${oc.env:HOME}", "a ${b} c", "${", "%YAML 1.2", "---", "...", "? x",
            "{name: unipc, num_train_timesteps: 0}", "{name: unipc, flow_shift: .nan}", "{name: unipc, eta: 1e999}",
            "{name: warp}", "unipc", "{name: unipc, speed: 2}", "dpm_solver++", "flow_euler", "flow_euler_ancestral",
            "cogvideox_ddim", "cogvideox_dpm", "{name: unipc, solver_order: 7}", "{name: unipc, flow_shift: -3}",
            "{name: unipc, flow_shift: 0}", "{name: flow_euler, shift: 0}", "{name: flow_euler, shift: -1}",
            "{name: dpm_solver++, solver_order: 0}", "{name: flow_euler_ancestral, eta: -1, s_noise: 1e30}",
            "{name: unipc, use_dynamic_shifting: true}", "{name: cogvideox_ddim, beta_start: 2, beta_end: -1}",
            "{name: unipc, trained_betas: [0.5, 2]}", "{name: unipc, steps_offset: 5000}",
            "{name: flow_euler, shift_terminal: 1}", "{name: unipc, sigma_min: 5, sigma_max: 1}",
            "/proc/x", "/dev/null", "~/x.mp4", "out/a.mp4",
            "v" * 300, "a" * 240 + ".mp4", "1" + "0" * 400, str(2**63), str(-(2**63) - 1)]

_scalar_text = st.text(st.characters(codec="utf-8"), max_size=12)
values = st.one_of(
    st.sampled_from(SNIPPETS),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: ".nan" if math.isnan(f) else (".inf" if f == math.inf else ("-.inf" if f == -math.inf else repr(f)))),
    _scalar_text,
    st.lists(st.sampled_from(SNIPPETS[:20]), max_size=3).map(lambda xs: "".join(xs)),
)


@st.composite
def overrides(draw):
    items = []
    if draw(st.integers(0, 9)) < 9:
        items.append(f"model.id={draw(st.sampled_from(MODEL_IDS))}")
    n = draw(st.integers(0, 5))
    for _ in range(n):
        key = draw(st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS), st.sampled_from(BAD_KEYS)))
        items.append(f"{key}={draw(values)}" if draw(st.integers(0, 19)) else draw(values))
    return items


@st.composite
def yaml_files(draw):
    """Either a YAML document built from drawn keys and values, or drawn text/bytes."""
    if draw(st.booleans()):
        doc: dict = {"model": {"id": draw(st.sampled_from(MODEL_IDS))}}
        for _ in range(draw(st.integers(0, 4))):
            key = draw(st.sampled_from(KEYS + BAD_KEYS))
            raw = draw(values)
            try:
                val = yaml.safe_load(raw)
            except Exception:  # noqa: BLE001 - keep the text itself then
                val = raw
            node = doc
            parts = key.split(".")
            for p in parts[:-1]:
                node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else node
            node[parts[-1]] = val
        return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")
    chunks = draw(st.lists(st.one_of(st.sampled_from(SNIPPETS).map(str.encode), st.binary(max_size=8)), max_size=8))
    return b"model: {id: wan2.1-t2v-1.3b}\n" * draw(st.integers(0, 1)) + b"\n".join(chunks)


OUTCOMES = Outcomes("config")
PLUGINS = None


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    OUTCOMES.report()
    if sum(FULL.counts.values()):
        FULL.report()
    OUTCOMES.assert_clean()


def _plugins():
    global PLUGINS
    if PLUGINS is None:
        PLUGINS = get_plugins()
    return PLUGINS


def _resolve_and_check(yaml_path, items):
    plugins = _plugins()
    cfg = config.resolve(yaml_path, items, plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins)
    # properties of any accepted config
    for item in items:
        key, _, raw = item.partition("=")
        if key in ("prompt", "negative_prompt") and item == items[max(i for i, x in enumerate(items)
                                                                      if x.partition("=")[0] == key)]:
            assert getattr(cfg, key) == raw, (key, raw, getattr(cfg, key))
    s = cfg.sampling
    for v in (s.guidance_scale, s.guidance_scale_2):
        assert v is None or math.isfinite(v)
    if isinstance(s.scheduler, dict):
        assert all(math.isfinite(v) for v in s.scheduler.values() if isinstance(v, float))


def _dry_run(argv):
    code = cli.main(argv + ["--dry-run", "--quiet"])
    assert code in (0, 2), code
    if code == 2:
        from vidax_core.errors import UserError

        raise UserError("dry run refused the input")  # counted as a clean user error; stderr checked by caller


@settings(**fuzz_settings(default=60))
@given(items=overrides(), use_yaml=st.integers(0, 3), text=yaml_files(), dry=st.integers(0, 24))
def test_config_contract(tmp_path_factory, capfd, items, use_yaml, text, dry):
    folder = tmp_path_factory.mktemp("cfg")
    old = os.getcwd()
    os.chdir(folder)
    try:
        path = None
        if use_yaml == 0:
            path = str(folder / "run.yaml")
            with open(path, "wb") as f:
                f.write(text)
        outcome = check_contract(OUTCOMES, lambda: _resolve_and_check(path, items), label=repr(items)[:300])
        if dry == 0 and outcome == "ok":
            argv = ["run"] + ([path] if path else []) + items + ["model.checkpoint=builtin:tiny-random",
                                                                 f"runtime.compilation_cache_dir={suite_cache_dir()}"]
            capfd.readouterr()
            check_contract(OUTCOMES, lambda: _dry_run(argv), label="dry run " + repr(argv)[:300])
            err = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()]
            assert len(err) <= 1 and all(ln.startswith("error: ") and "internal error" not in ln for ln in err), err
    finally:
        os.chdir(old)


FULL = Outcomes("whole run")


@st.composite
def runnable(draw):
    """Overrides that may well be valid, for whole runs of the tiny model."""
    items = ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
             "sampling.width=32", f"sampling.num_frames={draw(st.sampled_from([1, 5]))}",
             f"sampling.num_steps={draw(st.integers(1, 3))}", "sampling.max_sequence_length=8",
             f"sampling.seed={draw(st.one_of(st.integers(0, 10), st.just(2**63 - 1), st.just(2**63)))}",
             f"sampling.guidance_scale={draw(st.sampled_from(['0', '1', '5.5', '.inf', '1e300']))}",
             f"output.fps={draw(st.sampled_from(['1', '16', '1000', '1001', '9223372036854775808']))}",
             f"prompt={draw(st.text(max_size=20))}"]
    sched = draw(st.sampled_from([None, "unipc", "flow_euler", "dpm_solver++", "{name: unipc, flow_shift: 1e9}",
                                  "{name: flow_euler, shift: -1}", "{name: unipc, solver_order: 3}"]))
    if sched:
        items.append(f"sampling.scheduler={sched}")
    name = draw(st.sampled_from(["o.mp4", "v" * 236 + ".mp4", "sub/dir/o.mp4", "${x}.mp4", "~/home.mp4", "é 1.mp4"]))
    items.append(f"output.path={name}")
    if draw(st.booleans()):
        items.append(f"output.save_latents={draw(st.sampled_from(['l.npy', name]))}")
    if draw(st.booleans()):
        items.append("output.metrics=m.json")
    return items


@pytest.mark.skipif(not os.environ.get("VIDAX_FUZZ_CAMPAIGN"), reason="whole runs belong to the `make fuzz` campaign")
@settings(**{**fuzz_settings(default=0), "max_examples": max(1, int(os.environ.get("VIDAX_FUZZ_FULL_RUNS", "20")))})
@given(items=runnable())
def test_whole_runs_exit_0_only_with_decodable_outputs(tmp_path_factory, capfd, items):
    """Exit 0 means every requested output exists, is not empty, and decodes; anything else is one error line."""
    from vidax_core.io.video import read_mp4

    folder = tmp_path_factory.mktemp("run")
    old, home = os.getcwd(), os.environ.get("HOME")
    os.chdir(folder)
    os.environ["HOME"] = str(folder)
    try:
        capfd.readouterr()
        code = cli.main(["run", *items, f"runtime.compilation_cache_dir={suite_cache_dir()}", "--quiet"])
        err = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()]
        cfg = config.resolve(None, items, _plugins().preset_for) if code == 0 else None
        if code == 0:
            out = cfg.output
            frames = read_mp4(out.path)
            assert frames.shape[0] == cfg.sampling.num_frames and frames.size, frames.shape
            for p in (out.save_latents, out.metrics):
                assert p is None or os.path.getsize(p) > 0, p
            if out.save_latents:  # exit 0 never hands back NaN: the finite guard stops such a run
                saved = np.load(out.save_latents)
                arrays = [saved[k] for k in saved.files] if hasattr(saved, "files") else [saved]
                assert all(np.isfinite(a).all() for a in arrays), "exit 0 with non-finite latents"
            FULL.add("ok")
        else:
            assert code == 2 and len(err) == 1 and err[0].startswith("error: "), (code, err)
            assert "internal error" not in err[0], err
            FULL.add("user_error", err[0])
    finally:
        os.chdir(old)
        if home is not None:
            os.environ["HOME"] = home
