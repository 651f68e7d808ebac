"""``FamilyTests``: the checks every model family gets by declaring a tiny checkpoint (a pytest mixin).

Example (a plugin's tests/test_family.py)::

    from vidax_core.testing.family import FamilyTests

    class TestTiny(FamilyTests):
        model_id = "example-tiny"
        overrides = ("sampling.num_steps=2",)
        golden = os.path.join(os.path.dirname(__file__), "golden", "sharding.json")

        @staticmethod
        def make_checkpoint(folder):
            write_tiny_checkpoint(folder)       # your plugin's tiny random checkpoint, real key names

The mixin builds the checkpoint once per class and runs, in one subprocess on 8 fake CPU devices, the model on one
device and under every configuration in ``parallel_configs`` and ``offload_configs``; each must match the one-device
latents within the layout tolerance (relative L2). Configurations the model cannot take (heads not divisible by
tp...) are left out by overriding the two mappings.

The layout tolerance is derived from the model's own float32 sensitivity, as the parity helper
:func:`vidax_core.testing.parity.assert_fp32_parity` derives its bound: the one-device run is repeated with its
initial noise moved one float32 ulp (``single_moved``), and a layout may differ from one device by at most
``tolerance_factor`` times that move (never less than ``TOLERANCE_FLOOR``). A layout changes only the order of
float32 operations (a tensor-parallel all-reduce, an all-to-all, a streamed block), which moves the result by
float32 rounding errors; how far those carry is the model's own property. Most models keep them near 1e-7, and one
move measures it. One that rounds to bfloat16 mid-network, as Kandinsky 5's attention does after RoPE, turns an ulp
of difference into a bfloat16 ulp here and there: its sensitivity is a count of flipped roundings, which one move
samples poorly (Kandinsky 5's two tiny classes: 2.6e-7 and 1.8e-6 for one move each, their layouts ~3e-6 on this
project's 2-core machine), so such a class sets ``noise_moves`` and the tolerance follows the largest of that many
moves (``single_moved``, ``single_moved_2`` ..., each its own random move; calls of the one loaded model). A class
may still fix ``tolerance``.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Mapping, Sequence

import pytest

from vidax_core.testing import checks
from vidax_core.testing.runs import run_many


class FamilyTests:
    model_id: ClassVar[str]
    overrides: ClassVar[Sequence[str]] = ()
    plugin_modules: ClassVar[Sequence[str]] = ()  # test-only plugins with register(plugins)
    golden: ClassVar[str | None] = None
    tolerance: ClassVar[float | None] = None  # None: derived from the model's float32 sensitivity (module docstring)
    tolerance_factor: ClassVar[float] = 10.0
    noise_moves: ClassVar[int] = 1  # one-ulp moves of the initial noise the tolerance takes the largest of
    TOLERANCE_FLOOR: ClassVar[float] = 1e-6
    tp2_weight_fraction: ClassVar[float] = 1.0  # tp=2 must hold less than this share of the weights per device
    # One layout per code path a family's own code can take: TP x SP (heads over tp, Ulysses all-to-alls over sp,
    # the family's shard rules and sequence splits) and offload with SP (the streamed block groups, the carry). TP
    # alone and offload alone run the same family code with the core's sp=1 shortcut, which the core's own tests
    # and the Wan family (TP_ONLY, OFFLOAD_ONLY) cover; a family adds layouts it needs (sp3, sp4, dp2...).
    TP_ONLY: ClassVar[Mapping[str, Sequence[str]]] = {"tp2": ("parallel.dp=1", "parallel.tp=2")}
    OFFLOAD_ONLY: ClassVar[Mapping[str, Sequence[str]]] = {"offload": ("parallel.dp=1", "offload.enabled=true")}
    parallel_configs: ClassVar[Mapping[str, Sequence[str]]] = {
        "tp2sp2": ("parallel.dp=1", "parallel.tp=2", "parallel.sp=2"),
    }
    offload_configs: ClassVar[Mapping[str, Sequence[str]]] = {
        "offload_sp2": ("parallel.dp=1", "parallel.sp=2", "offload.enabled=true"),
    }

    @staticmethod
    def make_checkpoint(folder: str) -> None:  # pragma: no cover - the subclass provides it
        raise NotImplementedError("write a tiny checkpoint of your model into `folder`")

    # more configurations to run in the same subprocess, for the family's own assertions on ``family_runs``
    # (``check_matches_single_device`` for those that must equal one device, the ``error`` of those refused)
    extra_configs: ClassVar[Mapping[str, Sequence[str]]] = {}

    # image-to-video: the name of the conditioning image ``make_checkpoint`` writes into the checkpoint folder
    image_file: ClassVar[str | None] = None

    @classmethod
    def base_overrides(cls, checkpoint: str) -> list[str]:
        image = [f"image={os.path.join(checkpoint, cls.image_file)}"] if cls.image_file else []
        return [f"model.id={cls.model_id}", f"model.checkpoint={checkpoint}", *cls.overrides, *image]

    def plugins(self) -> Any:
        import importlib

        from vidax_core.plugins import Plugins

        p = Plugins()
        p.load_entry_points()
        for name in self.plugin_modules:
            importlib.import_module(name).register(p)
        return p

    @pytest.fixture(scope="class")
    @classmethod
    def checkpoint(cls, tmp_path_factory) -> str:
        folder = str(tmp_path_factory.mktemp("family_ckpt"))
        cls.make_checkpoint(folder)
        return folder

    @pytest.fixture(scope="class")
    @classmethod
    def family_runs(cls, checkpoint) -> dict:
        moved = cls.moved_names()
        configs = {"single": ("parallel.dp=1",), **{m: ("parallel.dp=1",) for m in moved}, **cls.parallel_configs,
                   **cls.offload_configs, **cls.extra_configs}
        return run_many(cls.base_overrides(checkpoint), configs, plugin_modules=cls.plugin_modules, moved=moved)

    @classmethod
    def moved_names(cls) -> tuple[str, ...]:
        """The one-device runs with moved initial noise: ``single_moved``, then ``single_moved_2`` ..."""
        return ("single_moved",) + tuple(f"single_moved_{k}" for k in range(2, cls.noise_moves + 1))

    def test_converted_tree_equals_abstract(self, checkpoint):
        problems = checks.converted_tree_problems(self.plugins(), self.base_overrides(checkpoint))
        assert not problems, "\n".join(problems[:20])

    def layout_tolerance(self, runs: dict) -> float:
        """``tolerance`` when the class fixes one, else ``tolerance_factor`` x the one-device run's largest move
        under one-ulp changes of its initial noise (``runs["single_moved"]`` ...), at least ``TOLERANCE_FLOOR``."""
        if self.tolerance is not None:
            return self.tolerance
        return max(self.tolerance_factor * self.noise_move(runs), self.TOLERANCE_FLOOR)

    def noise_move(self, runs: dict) -> float:
        """The largest relative move of the one-device latents over the class's one-ulp noise moves."""
        moves = [runs[m] for m in self.moved_names()]
        assert not any("error" in m for m in moves), moves
        return max(m["rel"] for m in moves)

    def check_matches_single_device(self, runs: dict, names) -> None:
        """Each of ``names`` (keys of ``family_runs``: a parallel, offload or extra configuration) ran and its final
        latents are within :meth:`layout_tolerance` of the one-device run's; use it for an ``extra_configs`` entry
        too."""
        tol = self.layout_tolerance(runs)
        moves = ", ".join(f"{runs[m].get('rel', 0):.2e}" for m in self.moved_names())
        print(f"{self.model_id}: layout tolerance {tol:.2e} (one-ulp noise moves {moves})")
        bad = {}
        for name in names:
            r = runs[name]
            print(f"{self.model_id} {name}: " + (r["error"] if "error" in r else f"rel err vs 1 device {r['rel']:.2e}"))
            if "error" in r or not r["rel"] < tol:
                bad[name] = r.get("error", r.get("rel"))
        assert not bad, (bad, tol)

    def test_parallel_equals_single_device(self, family_runs):
        self.check_matches_single_device(family_runs, self.parallel_configs)

    def test_offload_equals_resident(self, family_runs):
        self.check_matches_single_device(family_runs, self.offload_configs)
        for name in self.offload_configs:
            assert family_runs[name]["offload"]["enabled"], name

    def test_mesh_axes_are_the_ones_asked_for(self, family_runs):
        """Each layout ran on the mesh its ``parallel.dp/tp/sp`` overrides ask for (a run that silently fell back to
        fewer devices would match one device trivially)."""
        for name, overrides in {**self.parallel_configs, **self.offload_configs}.items():
            asked = {k.split(".")[1]: int(v) for k, _, v in (o.partition("=") for o in overrides)
                     if k in ("parallel.dp", "parallel.tp", "parallel.sp")}
            ran = family_runs[name]["parallel"]
            assert {axis: ran[axis] for axis in asked} == asked, (name, ran)

    def test_tp_shards_the_weights_and_sp_does_not(self, family_runs):
        """TP 2 holds less than ``tp2_weight_fraction`` of the one-device weights per device (read from the tp2
        layout, else tp2sp2: SP shards no weight); with both layouts, adding SP 2 holds exactly what TP 2 does."""
        tp_layouts = [name for name in ("tp2", "tp2sp2") if name in family_runs]
        if not tp_layouts:
            pytest.skip("needs the tp2 or tp2sp2 layout")
        full = family_runs["single"]["peak_resident_weight_bytes"]
        tp2 = family_runs[tp_layouts[0]]["peak_resident_weight_bytes"]
        assert tp2 < self.tp2_weight_fraction * full, (tp2, full)
        for name in tp_layouts:
            assert family_runs[name]["peak_resident_weight_bytes"] == tp2, name

    def test_golden_sharding(self, checkpoint):
        assert self.golden, "declare `golden = <path of a JSON file>`: the first run writes the table there"
        checks.check_golden(checks.sharding_table(self.plugins(), self.base_overrides(checkpoint)), self.golden)
