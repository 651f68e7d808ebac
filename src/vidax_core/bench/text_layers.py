"""Components whose sizes follow the text encoder's layer count, for a random checkpoint with a cut text encoder.

Some models read every hidden state of their text encoder, concatenated on the feature axis: LTX-2's connectors
(``text_proj_in_factor`` = Gemma's layers + 1, ``text_proj_in`` taking 3840 x 49 features), Cosmos-Predict2.5's
DiT (``crossattn_proj_in_channels`` = Qwen's hidden size x 28 layers). A family declares each such reader as a
:class:`TextLayerReader` (``FamilyPlugin.text_layer_readers``); when ``vidax bench --write-random-checkpoint`` cuts
the text encoder to one layer, the reader's config value and the input width of its matrices are scaled to the
layers kept, so the cut checkpoint still loads and runs: a stand-in whose denoiser is the real one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, MutableMapping, Sequence


@dataclass(frozen=True)
class TextLayerReader:
    """``component``'s ``config_key`` and the input width (last axis) of the matrices whose keys fully match
    ``tensors`` are proportional to the text encoder's layers + ``offset`` (1 when its input embeddings count)."""

    component: str
    config_key: str
    tensors: str
    offset: int = 0
    text_component: str = "text_encoder"


def text_layers(config: Mapping[str, Any]) -> int | None:
    """The layer count of a transformers text encoder's config (a multimodal one's ``text_config``), or None."""
    inner = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    for key in ("num_hidden_layers", "num_layers"):
        if isinstance(inner.get(key), int):
            return inner[key]
    return None


def _scaled(value: int, old: int, new: int, what: str) -> int:
    if value % old:
        raise ValueError(f"{what} = {value} is not a multiple of the text encoder's {old} hidden states")
    return value // old * new


def follow_text_cut(plans: MutableMapping[str, tuple[dict, Mapping[str, list], dict]],
                    readers: Sequence[TextLayerReader], layers_before: Mapping[str, int]) -> None:
    """Scale every declared reader in ``plans`` (component -> (config, tensors, what was cut), as the writer holds
    them) to the layer count its text encoder's plan keeps; ``layers_before`` is each text encoder's published
    count. A reader whose component or text encoder is absent, or whose encoder kept every layer, is left as is."""
    for r in readers:
        if r.component not in plans or r.text_component not in plans or r.text_component not in layers_before:
            continue
        after = text_layers(plans[r.text_component][0])
        before = layers_before[r.text_component]
        if after is None or after == before:
            continue
        old, new = before + r.offset, after + r.offset
        config, tensors, cut = plans[r.component]
        config = dict(config)
        if r.config_key in config:
            config[r.config_key] = _scaled(int(config[r.config_key]), old, new, f"{r.component} {r.config_key}")
        pattern = re.compile(r.tensors)
        scaled = {}
        for key, (shape, dtype) in tensors.items():
            if pattern.fullmatch(key):
                shape = [*shape[:-1], _scaled(shape[-1], old, new, f"{r.component} {key}'s input width")]
            scaled[key] = [shape, dtype]
        plans[r.component] = (config, scaled, {**cut, r.config_key: config.get(r.config_key, new)})
