"""Load once means once: a loaded pipe keeps what it loaded across calls that differ only in what a call may
change without a new program or weight (prompt, seed, noise, image content, step recipe), parses its checkpoint's
JSON once, and a served request is planned once, by the plan its worker then runs.

Counted, not timed: the family's ``build_vae`` hook calls (through the plugin manager), the checkpoint tensors read
to be placed, XLA compiles, JSON files opened and the planner's plans (:class:`vidax_core.runner.plan.Planner`).
"""

from __future__ import annotations

import collections
import json
import os

import pytest

import vidax
from serve_stub import form, png, request, wait_done
from vidax_core.testing.counters import Counters

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
COSMOS = os.path.join(os.path.dirname(__file__), "..", "configs", "cosmos_demo.yaml")
FAST = ("sampling.num_steps=2", "sampling.height=32", "sampling.width=32", "sampling.num_frames=5",
        "sampling.max_sequence_length=16", "runtime.compilation_cache=false")


def count_hooks(monkeypatch, model) -> collections.Counter:
    """Calls of each per-model hook the loaded model makes from now on."""
    calls: collections.Counter = collections.Counter()
    real = model.plugins.call

    def call(hook_name, spec, **kwargs):
        calls[hook_name] += 1
        return real(hook_name, spec, **kwargs)

    monkeypatch.setattr(model.plugins, "call", call)
    return calls


def test_new_seeds_build_no_vae_place_no_weight_and_compile_nothing(monkeypatch):
    counters = Counters(monkeypatch)
    with vidax.load(DEMO, *FAST) as pipe:
        model = pipe._model
        first = pipe(prompt="a red fox", seed=0)
        assert counters.tensor_reads > 0 and counters.compiles > 0  # the counters see the first call's work
        hooks = count_hooks(monkeypatch, model)
        for seed in range(1, 6):
            counters.reset()
            out = pipe(prompt="a red fox", seed=seed)
            assert hooks["build_vae"] == 0, f"call with seed {seed} built the VAE again"
            assert counters.tensor_reads == 0, f"call with seed {seed} read {counters.tensor_reads} weights"
            assert counters.compiles == 0, f"call with seed {seed} compiled {counters.compiles} programs"
            assert counters.weight_opens == []
            assert out.frames.shape == first.frames.shape
        counters.reset()  # a new step recipe compiles its step, and keeps the VAE
        pipe(prompt="a red fox", seed=1, num_steps=3, guidance_scale=3.0)
        assert hooks["build_vae"] == 0 and counters.tensor_reads == 0
        counters.reset()  # what changes the VAE's program rebuilds it (the counters can fail): a new frame count
        pipe(prompt="a red fox", seed=1, num_frames=9)
        assert hooks["build_vae"] == 1 and counters.tensor_reads > 0


def test_checkpoint_json_is_parsed_once_per_load(monkeypatch):
    counters = Counters(monkeypatch)
    with vidax.load(DEMO, *FAST) as pipe:
        for seed in range(3):
            pipe(prompt="a boat", seed=seed)
        root = os.path.realpath(pipe._model.ckpt.root)
    opened = collections.Counter(os.path.realpath(o) for o in counters.opens
                                 if o.endswith(".json") and os.path.realpath(o).startswith(root))
    assert opened, "the load reads its checkpoint's JSON files"
    assert max(opened.values()) == 1, {k: v for k, v in opened.items() if v > 1}


# read_mp4-free, but the server's mp4 writer starts ffmpeg: a fork followed at once by an exec
@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")
def test_served_image_requests_plan_once_and_build_the_vae_once(monkeypatch, tmp_path):
    from vidax_core.serve import Server

    with vidax.load(COSMOS, *FAST) as pipe:
        model = pipe._model
        plans = model.planner.calls
        hooks = count_hooks(monkeypatch, model)
        with Server(pipe, port=0, output_dir=str(tmp_path / "out"), quiet=True) as srv:
            assert model.planner.calls == plans, "server start planned calls to fill its page"
            ids = []
            for n in range(5):  # five different images, each uploaded to its own path
                body, ctype = form({"prompt": "a robot", "seed": str(n)},
                                   {"input_reference": ("in.png", png(seed=n), "image/png")})
                status, _, reply = request(srv.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
                assert status == 200, reply
                ids.append(json.loads(reply)["id"])
            for job_id in ids:
                assert wait_done(srv.url, job_id, timeout=300)["status"] == "completed"
        assert model.planner.calls == plans + 5, "each request is planned once, when it is posted"
        assert hooks["build_vae"] == 1, f"{hooks['build_vae']} VAE builds for five images"
