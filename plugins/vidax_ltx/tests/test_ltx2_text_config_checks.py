"""Broken Gemma-4 text-encoder configs of LTX-2.5 (issue 51): refused by the dry run as the run refuses them.

An LTX-2.5 Gemma-4 config with ``rms_norm_eps: -1`` made the video and audio all NaN (the mp4 black, rc 0); the dry
run accepted 28 of 30 broken Gemma-4 configs the run then refused. The dry run now builds the prompt encoder as the
run does, nothing read (:mod:`vidax_core.report.encoder_check`): for every config below, the dry run's check and the
run's build agree, refusal for refusal, in the same words.
"""

from __future__ import annotations

import json
import os

import pytest

from vidax_core import cli, config
from vidax_core.errors import UserError
from vidax_core.io.run_checkpoint import checkpoint_for_run
from vidax_core.plugins import get_plugins
from vidax_core.report.encoder_check import check_text_encoder
from vidax_core.testing.assets import writable_asset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEMO = os.path.join(ROOT, "configs", "ltx2_demo.yaml")
ROPE = {"full_attention": {"rope_theta": 1e6, "rope_type": "proportional", "partial_rotary_factor": 0.25},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}

BROKEN = {  # text_config key -> a broken value (None: the run accepts it as well)
    "eps-minus-one": ("rms_norm_eps", -1, "key rms_norm_eps must be a small positive number"),
    "eps-five": ("rms_norm_eps", 5.0, "key rms_norm_eps must be a small positive number"),
    "layers-zero": ("num_hidden_layers", 0, "num_hidden_layers must be from 1"),
    "hidden-odd": ("hidden_size", 15, "does not match the model"),
    "kv-heads-two": ("num_key_value_heads", 2, "does not match the model"),
    "sliding-window-negative": ("sliding_window", -4, "sliding_window must be from 1"),
    "layer-types-short": ("layer_types", ["full_attention"], "layer_types has 1 entries for 3 layers"),
    "rope-theta-negative": ("rope_parameters", {**ROPE, "full_attention": {**ROPE["full_attention"], "rope_theta": -1}},
                            "rope_theta=-1.0 must be a positive number"),
    "rope-theta-text": ("rope_parameters", {**ROPE, "full_attention": {"rope_theta": "abc"}}, "unusable value"),
    "softcap-nan": ("attn_logit_softcapping", float("nan"), "must be a finite number"),
    "kv-shared-past-the-layers": ("num_kv_shared_layers", 9, "num_kv_shared_layers=9 must be below"),
    "activation-unknown": ("hidden_activation", "nope", "hidden_act='nope' is not supported"),
}


@pytest.fixture(scope="module")
def plugins():
    return get_plugins()


def _broken(tmp_path, key, value):
    ckpt = writable_asset("vidax_ltx", tmp_path / "ckpt", name="ltx2-tiny-random")
    path = os.path.join(ckpt, "text_encoder", "config.json")
    with open(path) as f:
        data = json.load(f)
    data["text_config"][key] = value
    with open(path, "w") as f:
        json.dump(data, f)
    return ckpt


def _outcome(fn) -> str:
    try:
        fn()
    except UserError as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_dry_run_refuses_the_text_encoder_configs_the_run_refuses(plugins, tmp_path, case):
    key, value, words = BROKEN[case]
    ckpt = _broken(tmp_path, key, value)
    cfg = config.resolve(DEMO, [f"model.checkpoint={ckpt}"], plugins.preset_for)
    spec = plugins.registry.get(cfg.model.id)

    def dry():
        check_text_encoder(spec, checkpoint_for_run(cfg, spec, plugins, configs_only=True), cfg, plugins)

    def run():
        plugins.call("build_text_encoder", spec, ckpt=checkpoint_for_run(cfg, spec, plugins), run=cfg, mesh=None)

    said, done = _outcome(dry), _outcome(run)
    assert said == done and words in said, (said, done)


def test_gemma4_rms_norm_eps_minus_one_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    """An LTX-2.5 Gemma-4 config with rms_norm_eps: -1 (video and audio all NaN, mp4 black): one line from the dry
    run and from the run, before any step."""
    from vidax_core.testing.cli import assert_refused

    monkeypatch.chdir(tmp_path)
    ckpt = _broken(tmp_path, "rms_norm_eps", -1)
    code = cli.main(["run", DEMO, f"model.checkpoint={ckpt}", "--dry-run"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "rms_norm_eps must be a small positive number" in err[0], err
    assert_refused([DEMO, f"model.checkpoint={ckpt}", f"output.path={tmp_path / 'o.mp4'}", "output.metrics=null",
                    f"runtime.compilation_cache_dir={tmp_path / 'jc'}"], "rms_norm_eps", capsys, monkeypatch)
    assert not (tmp_path / "o.mp4").exists()
