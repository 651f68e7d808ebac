"""``vidax run`` frees the denoiser's weights (device arrays, streamed chunks in host memory) before its one decode,
so the decode has the devices and the host to itself; the dry run counts the denoiser in the denoising phase only.
A loaded pipe keeps its denoiser for the next call."""

from __future__ import annotations

import gc
import weakref

import jax
import numpy as np
import pytest

from vidax_core import config as config_mod
from vidax_core.plugins import get_plugins
from vidax_core.report.progress import Reporter
from vidax_core.runner import loaded

SMALL = ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "prompt=a fox",
         "sampling.height=32", "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8", "output.path=null"]


def _watch_decode(monkeypatch):
    """Patch the decode to record, as it starts, what of each expert's weights is still alive."""
    seen = {}
    decode = loaded.LoadedModel._decode
    drop = loaded.LoadedModel._drop_denoisers

    def drop_watched(self):
        arrays = [a for e in self.experts for a in jax.tree.leaves(
            (e.params, [st.rest for st in [e.step] if e.model is not None], [
                p.host.chunks for st in [e.step] if e.model is not None for p in st.pools]))
            if isinstance(a, jax.Array)]
        seen["before"] = [weakref.ref(a) for a in arrays]
        del arrays
        drop(self)

    def watched(self, plan, vae, final, timer, on_decode=None):
        seen["alive"] = sum(r() is not None for r in seen.get("before", []))
        seen["held"] = [(e.params is not None, e.model is not None) for e in self.experts]
        return decode(self, plan, vae, final, timer, on_decode)

    monkeypatch.setattr(loaded.LoadedModel, "_drop_denoisers", drop_watched)
    monkeypatch.setattr(loaded.LoadedModel, "_decode", watched)
    return seen


@pytest.mark.parametrize("extra", [[], ["offload.enabled=true", "offload.chunk_size=1"]], ids=["resident", "offload"])
def test_a_single_run_decodes_without_the_denoiser(monkeypatch, extra):
    seen = _watch_decode(monkeypatch)
    plugins = get_plugins()
    cfg = config_mod.resolve(None, SMALL + extra, plugins.preset_for)
    gc.disable()  # freed by their references alone, not by a collection that happens to run
    try:
        res = loaded.run(cfg, plugins, Reporter(quiet=True))
    finally:
        gc.enable()
    assert len(seen["before"]) > 2, "the weights were not found before the drop"
    assert seen["alive"] == 0, f"{seen['alive']} of the denoiser's arrays outlived the drop"
    assert seen["held"] == [(False, False)]
    assert np.isfinite(res.frames).all()
    if extra:  # what the metrics say of the streamed blocks is kept
        assert res.metrics["offload"]["enabled"] and res.metrics["offload"]["host_bytes"] > 0


def test_a_loaded_pipe_keeps_its_denoiser(monkeypatch):
    import vidax

    seen = _watch_decode(monkeypatch)
    with vidax.load("wan2.1-t2v-1.3b", *SMALL[1:]) as pipe:
        a = pipe(prompt="a fox", seed=3)
        assert "before" not in seen and seen["held"] == [(True, False)]
        b = pipe(prompt="a fox", seed=3)
        assert seen["held"] == [(True, False)]
    np.testing.assert_array_equal(a.frames, b.frames)


@pytest.mark.parametrize("extra", [[], ["offload.enabled=true", "offload.chunk_size=1"]], ids=["resident", "offload"])
def test_the_dry_run_counts_the_denoiser_while_it_denoises(capfd, extra):
    from vidax_core import cli

    assert cli.main(["run", *SMALL, *extra, "--dry-run"]) == 0
    line = next(x for x in capfd.readouterr().out.splitlines() if x.startswith("  denoiser "))
    assert "[denoise]" in line and "freed before the decode" in line, line
