"""``vidax bench`` arguments validated like the run's (issue 51, item 6): 21 internal errors
(``--write-random-checkpoint`` into a file, ``/dev/null``, under a file, ``''``; ``--name a/b``; ``--random-blocks
-1``; ``--batch -1``; ``--batch 100000`` -> MemoryError), ``--random-blocks 0`` or more blocks than the model has
built the WHOLE published DiT (OOM-killed at 15-20 GB, no line), ``--dit-only`` with its defaults compiled a
30-block DiT (over a minute). Each is one ``error:`` line (exit 2) before any work."""

from __future__ import annotations

import os

import pytest

from vidax_core import cli
from vidax_core.bench import arguments, command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "configs", "demo.yaml")
RANDOM_DIT = [DEMO, "--random-dit", "sampling.height=32", "sampling.width=32", "sampling.num_frames=1"]


def _setup(t):
    (t / "afile").write_text("x")
    return t


CASES = [
    ("write-random-checkpoint-into-a-file",
     lambda t: ["--write-random-checkpoint", "wan2.1-t2v-1.3b", str(t / "afile")], "exists and is not a folder"),
    ("write-random-checkpoint-dev-null", lambda t: ["--write-random-checkpoint", "wan2.1-t2v-1.3b", "/dev/null"],
     "/dev/null exists and is not a folder"),
    ("write-random-checkpoint-under-a-file", lambda t: ["--write-random-checkpoint", "wan2.1-t2v-1.3b",
                                                        str(t / "afile" / "ckpt")], "is not a folder"),
    ("write-random-checkpoint-empty", lambda t: ["--write-random-checkpoint", "wan2.1-t2v-1.3b", ""],
     "needs a folder, got an empty path"),
    ("name-with-a-folder", lambda t: [DEMO, "--name", "a/b"], "--name must be a plain file name"),
    ("name-dot-dot", lambda t: [DEMO, "--name", ".."], "--name must be a plain file name"),
    ("out-dev-null", lambda t: [DEMO, "--out", "/dev/null"], "--out /dev/null exists and is not a folder"),
    ("random-blocks-minus-one", lambda t: [*RANDOM_DIT, "--random-blocks", "-1"], "must be from 1 to 256 blocks"),
    ("random-blocks-zero", lambda t: [*RANDOM_DIT, "--random-blocks", "0"], "must be from 1 to 256 blocks"),
    ("random-blocks-more-than-the-model-has", lambda t: [*RANDOM_DIT, "--random-blocks", "3"],
     "has at most 2 blocks in a group (blocks: 2); give at most 2, or --random-blocks all"),
    ("batch-minus-one", lambda t: [*RANDOM_DIT, "--batch", "-1"], "--batch must be from 1 to 64, got -1"),
    ("batch-100000", lambda t: [*RANDOM_DIT, "--batch", "100000"], "--batch must be from 1 to 64, got 100000"),
    ("attention-junk", lambda t: [*RANDOM_DIT, "--attention", "junk"], "--attention 'junk' is not an attention"),
    ("attention-without-random-dit", lambda t: [DEMO, "--attention", "junk"], "belong to --random-dit"),
    ("compile-blocks-junk", lambda t: ["--dit-only", "--compile-blocks", "2,x"], "--compile-blocks must be a comma"),
    ("compile-blocks-zero", lambda t: ["--dit-only", "--compile-blocks", "0,2"], "--compile-blocks values must be"),
    ("vae-frames-negative", lambda t: ["--dit-only", "--vae-frames", "-5"], "--vae-frames values must be"),
    ("repeats-zero", lambda t: [DEMO, "--repeats", "0"], "--repeats must be from 1"),
    ("host-devices-zero", lambda t: [DEMO, "--host-devices", "0"], "--host-devices must be from 1"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bench_arguments_are_one_line(case, tmp_path, capsys, monkeypatch):
    name, args, words = case
    monkeypatch.chdir(_setup(tmp_path))
    flags = args(tmp_path)
    out = [] if "--out" in flags or "--write-random-checkpoint" in flags else ["--out", str(tmp_path / "bench")]
    code = cli.main(["bench", *flags, *out, "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "internal" not in err[0], err
    assert words in err[0], err[0]
    assert not (tmp_path / "bench").exists()


def test_random_blocks_default_to_two_and_all_is_asked_for():
    """Never the whole published DiT by accident: 2 blocks a group unless ``all`` is given."""
    groups = {"blocks": 30}
    assert arguments.check_random_blocks(None, groups, "m") == arguments.DEFAULT_RANDOM_BLOCKS == 2
    assert arguments.check_random_blocks("all", groups, "m") is None
    assert arguments.check_random_blocks(30, groups, "m") == 30


def test_dit_only_defaults_compile_a_small_model():
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "--dit-only"])
    assert max(int(n) for n in args.compile_blocks.split(",")) <= 8
    assert "2,8" in parser._subparsers._group_actions[0].choices["bench"].format_help()
    assert command.DEFAULT_RANDOM_BLOCKS == 2


def test_a_memory_error_is_one_line(capsys, monkeypatch):
    def exhaust(args):
        raise MemoryError()

    monkeypatch.setattr(command, "cmd_bench", exhaust)
    code = cli.main(["bench", DEMO, "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: the host ran out of memory"), err
