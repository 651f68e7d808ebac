"""The prompt contexts a call's guidance reads: one encoder call for every prompt kind, split per prompt."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from vidax_core.config import RunConfig
from vidax_core.guidance import PROMPT
from vidax_core.parallel import sharding
from vidax_core.plugins import Plugins


def encode_prompts(spec, encoder, cfg: RunConfig, plugins: Plugins, kinds: Sequence[str], mesh) -> dict[str, Any]:
    """Encode every prompt kind the guidance branches read (``PROMPT`` / ``NEGATIVE``) with ``encoder``: one
    context (array or dict of arrays, batch 1) per kind. All kinds go to the plugin together, as a run encodes
    them (a plugin may treat the prompt and the negative prompt differently by position)."""
    texts = [cfg.prompt if p == PROMPT else cfg.negative_prompt for p in kinds]
    with sharding.activate(mesh, dict(sharding.ENCODER_RULES)):
        out = plugins.call("encode_prompt", spec, encoder=encoder, prompts=texts, run=cfg)
    if isinstance(out, (list, tuple)):  # one context per prompt, each with batch 1 (lengths may differ)
        if len(out) != len(texts):
            raise ValueError(f"encode_prompt returned {len(out)} contexts for {len(texts)} prompts")
        found = [jax.tree.map(np.asarray, c) for c in out]
    elif isinstance(out, dict):
        found = [{k: np.asarray(v)[i:i + 1] for k, v in out.items()} for i in range(len(texts))]
    else:
        out = np.asarray(out)
        found = [out[i:i + 1] for i in range(len(texts))]
    return dict(zip(kinds, found))
