"""The dry run's figures from a published layout (no files) agree with those of the random checkpoint written from
it (``vidax bench --write-random-checkpoint ID DIR --full-text-encoder --fill zeros``: sparse files, real headers).

The two paths share only the shipped layout record: one serves it from memory (:class:`PublishedCheckpoint`), the
other writes it out as safetensors files and JSON configs (storage dtypes of its own: bf16 / fp32) that the
ordinary :class:`Checkpoint` reads back from the file headers. What the dry run prints per component (the prompt
encoders at the dtype they compute in, the VAE at float32, the denoiser's configs and tensor bytes) must agree
within 10% for every registered id.
"""

from __future__ import annotations

import pytest

from vidax_core.plugins import get_plugins

PLUGINS = get_plugins()
IDS = [s.id for s in PLUGINS.registry]
# ids whose published layout sizes no prompt encoder: Cosmos3 feeds the prompt's tokens straight into its DiT;
# LTX-2.5's layout records the Gemma-4 text encoder's model_type only (no config, no tensor shapes); Kandinsky 6's
# super-resolution stage takes no prompt at all
NO_ENCODER = {"cosmos3-nano", "cosmos3-edge", "ltx-2.5-22b-dev", "ltx-2.5-22b-distilled", "kandinsky6-vsr",
              "kandinsky6-vsr-distill"}


def _figures(ckpt, spec, cfg):
    from vidax_core.placement import memory_plan as mp

    dits = [c for c in ("transformer", "transformer_2") if ckpt.has(c)]
    return {
        "encoders": mp.encoder_bytes(ckpt, spec, cfg),
        "vae": mp.vae_bytes(ckpt, cfg),
        **{f"{c} bf16": mp.component_bytes(ckpt, c, itemsize=2) for c in dits},
        **{f"{c} config": {k: v for k, v in ckpt.config(c).items() if not k.startswith("_")} for c in dits},
    }


@pytest.mark.parametrize("model_id", IDS)
def test_published_layout_sizes_as_the_written_checkpoint(model_id, tmp_path):
    from vidax_core.api import resolve_config
    from vidax_core.bench.random_checkpoint import write_random_checkpoint
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.io.published import PublishedCheckpoint

    spec = PLUGINS.registry.get(model_id)
    folder = tmp_path / "ckpt"
    write_random_checkpoint(model_id, str(folder), fill="zeros", full_text_encoder=True, log=lambda _m: None,
                            plugins=PLUGINS)
    cfg = resolve_config(model_id, ["sampling.num_frames=121", "model.dtype=bfloat16"], PLUGINS)
    published = _figures(PublishedCheckpoint(model_id, PLUGINS), spec, cfg)
    written = _figures(Checkpoint(str(folder)), spec, cfg)
    assert published.keys() == written.keys()
    assert published["vae"], published
    assert (published["encoders"] is None) == (model_id in NO_ENCODER), published["encoders"]
    for key, value in published.items():
        other = written[key]
        if value is None or isinstance(value, dict):
            assert value == other, key
        else:
            assert abs(value - other) <= 0.1 * other, (key, value, other)
