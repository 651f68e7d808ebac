"""LTX-2.x connectors read every hidden state of the text encoder (``text_proj_in_factor`` = its layers + 1): a
folder whose text encoder has another depth is one checkpoint problem before anything loads, not a ValueError
from inside the prompt encode (seen with a writer's folder whose Gemma was cut to one layer)."""

from __future__ import annotations

import json

from vidax_core.io.checkpoint import Checkpoint
from vidax_core.testing.assets import writable_asset
from vidax_ltx.ltx2_checks import text_layer_problems


def _layers(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg


def test_a_text_encoder_of_another_depth_is_a_checkpoint_problem(tmp_path):
    folder = writable_asset("vidax_ltx", tmp_path / "ckpt", "ltx2-tiny-random")
    assert text_layer_problems(Checkpoint(str(folder))) == []  # the shipped tiny folder is consistent
    path = folder / "text_encoder" / "config.json"
    cfg = json.loads(path.read_text())
    layers = _layers(cfg)["num_hidden_layers"]
    _layers(cfg)["num_hidden_layers"] = layers + 1
    path.write_text(json.dumps(cfg))
    found = text_layer_problems(Checkpoint(str(folder)))
    assert len(found) == 1 and f"has {layers + 1} layers" in found[0] and f"read {layers} layers'" in found[0]
