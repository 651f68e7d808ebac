"""Property-based fuzzing of ``vidax bench``'s arguments (issue 51): every mode (a config's cases, ``--random-dit``,
``--dit-only``, ``--write-random-checkpoint``) with its flags drawn from valid values and junk (folders that are
files or devices, names with paths, block counts and batches out of range, unknown backends and parts, comma lists
of anything).

What a case would then run is replaced by its checks alone (the cases' runs by their resolved configs, the random
DiT by its setup, which checks the block count against the model, the checkpoint writer by its folder and model
id checks, the DiT microbenchmarks by their parts), so an input costs a parse and the checks. The contract: exit 0,
or exit 2 with one ``error:`` line that is not an internal error; and nothing written outside ``--out``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings, report_all
from vidax_core import cli
from vidax_core.bench import command, dit, random_checkpoint, random_dit
from vidax_core.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "configs", "demo.yaml")
OUTCOMES = Outcomes("bench arguments")
NUMBERS = ["-1", "0", "1", "2", "3", "8", "64", "65", "100000", "x", "", "1.5", "99999999999999999999", "all"]
LISTS = ["2,8", "2,x", "0", "", ",", "-1,2", "99999", "5,17,33", "1,,2", "3"]


@pytest.fixture(scope="module", autouse=True)
def stubs():
    """Each mode's work replaced by its checks (see the module docstring)."""
    mp = pytest.MonkeyPatch()

    def case(engine, cfg_dict, **_kw):
        from vidax_core import config

        config.validate(cfg_dict)
        return {k: 0.0 for k in ("per_step_s", "compile_s", "total_s")}

    def random_main(args):
        random_dit.setup(args)
        return 0

    def dit_main(args):
        skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
        if skip - {"step", "compile", "vae", "reference"}:
            raise UserError(f"--skip: unknown part(s) {sorted(skip)}")
        dit.dit_parts(getattr(args, "overrides", None), need_reference=False)
        return 0

    def write(model_id, out, **kw):
        from vidax_core.bench.arguments import check_folder

        check_folder("--write-random-checkpoint OUT", out, empty=True)
        random_checkpoint.read_layout(model_id)
        return {"components": {}, "seconds": 0}

    mp.setattr(command, "_run_case", case)
    mp.setattr(command, "_machine_info_subprocess", lambda env: {})
    mp.setattr(random_dit, "main", random_main)
    mp.setattr(dit, "main", dit_main)
    mp.setattr(random_checkpoint, "write_random_checkpoint", write)
    yield
    mp.undo()
    report_all([OUTCOMES])


@st.composite
def bench_args(draw, tmp):
    afile = os.path.join(tmp, "afile")
    folders = [os.path.join(tmp, "out"), "/dev/null", afile, os.path.join(afile, "x"), "", "rel/out",
               os.path.join(tmp, "out", "deep", "er")]
    mode = draw(st.sampled_from(["cases", "random-dit", "dit-only", "write"]))
    if mode == "write":
        model = draw(st.sampled_from(["wan2.1-t2v-1.3b", "ltx-2.5-22b-dev", "junk-id", ""]))
        args = ["--write-random-checkpoint", model, draw(st.sampled_from(folders + [os.path.join(tmp, "ckpt")]))]
        if draw(st.booleans()):
            args += ["--blocks", draw(st.sampled_from(NUMBERS))]
        return args
    args = {"cases": [DEMO], "random-dit": [DEMO, "--random-dit", "sampling.height=32", "sampling.width=32",
                                            "sampling.num_frames=1"],
            "dit-only": ["--dit-only", "model.id=" + draw(st.sampled_from(["wan2.1-t2v-1.3b", "junk"]))]}[mode]
    args = list(args)
    flags = {"--name": st.sampled_from(["b", "a/b", "", "..", ".", "x" * 300, "é", "a\\b"]),
             "--out": st.sampled_from(folders),
             "--random-blocks": st.sampled_from(NUMBERS), "--batch": st.sampled_from(NUMBERS),
             "--attention": st.sampled_from(["auto", "xla", "junk", "xla,blockwise", "", ",", "auto,junk"]),
             "--compile-blocks": st.sampled_from(LISTS), "--vae-frames": st.sampled_from(LISTS),
             "--vae-size": st.sampled_from(NUMBERS), "--repeats": st.sampled_from(NUMBERS),
             "--host-devices": st.sampled_from(NUMBERS), "--offload": st.sampled_from(LISTS),
             "--skip": st.sampled_from(["", "step", "vae,compile", "junk", ","]),
             "--sweep": st.sampled_from(["offload=off,1", "x", "sampling.num_steps=1,2", "=1", "offload=7"])}
    for flag in draw(st.lists(st.sampled_from(sorted(flags)), max_size=4, unique=True)):
        args += [flag, draw(flags[flag])]
    return args


@settings(**fuzz_settings(default=30))
@given(data=st.data())
def test_bench_arguments(tmp_path_factory, data, capsys):
    tmp = str(tmp_path_factory.mktemp("bench"))
    with open(os.path.join(tmp, "afile"), "w") as f:
        f.write("x")
    args = data.draw(bench_args(tmp))
    if "--out" not in args and "--write-random-checkpoint" not in args:
        args += ["--out", os.path.join(tmp, "out")]

    def use():
        capsys.readouterr()
        code = cli.main(["bench", *args, "--quiet"])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        if code == 0:
            return
        if code != 2 or len(err) != 1 or not err[0].startswith("error: ") or "internal error" in err[0]:
            raise AssertionError(f"exit {code}: {err}")
        raise UserError(err[0][len("error: "):])

    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        check_contract(OUTCOMES, use, label=" ".join(args)[:300])
    finally:
        os.chdir(cwd)
    left = sorted(set(os.listdir(tmp)) - {"afile", "out", "rel", "ckpt"})
    assert not left, left
