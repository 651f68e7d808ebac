"""``vidax run --dry-run`` sizes what the real run would place and checks what the real run checks.

Expected sizes come from outside the dry run: the torch reference's own parameter count (tiny Wan2.2 A14B, two
experts) and the toy family's declared shapes (two stacked groups of different depth).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core import config as config_mod
from vidax_core.plugins import Plugins
from vidax_core.report.dry_run import _fmt_bytes, describe_plan
from vidax_core.testing.cli import vidax
from vidax_core.testing.toy_groups import ToyGroupsPlugin, expected_bytes, toy_checkpoint
from vidax_core.testing.devices import xla_flags

SMALL = ["sampling.height=32", "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2"]


def _line(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(prefix))


def _toy_plan(tmp_path, double: int, single: int, *overrides: str) -> str:
    plugins = Plugins()
    plugins.add(ToyGroupsPlugin(double, single), "toy")
    ckpt = toy_checkpoint(tmp_path / "toy")
    cfg = config_mod.resolve(None, ["model.id=toy-groups", f"model.checkpoint={ckpt}", *overrides], plugins.preset_for)
    return describe_plan(cfg, plugins)


@pytest.fixture(scope="module")
def a14b(tmp_path_factory):
    pytest.importorskip("diffusers")
    from vidax_core.testing.tiny.folders import save_tiny_wan_variant, torch_param_bytes

    folder, pipe = save_tiny_wan_variant(tmp_path_factory.mktemp("a14b") / "ckpt", "wan2.2-t2v-a14b")
    sizes = {c: torch_param_bytes(getattr(pipe, c)) for c in ("transformer", "transformer_2")}
    blocks = {c: sum(int(p.numel()) * 4 for n, p in getattr(pipe, c).named_parameters() if n.startswith("blocks."))
              for c in sizes}
    return folder, sizes, blocks


def test_two_experts_are_sized_each(a14b):
    folder, sizes, blocks = a14b
    proc = vidax("run", "model.id=wan2.2-t2v-a14b", f"model.checkpoint={folder}", *SMALL, "--dry-run", timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    total = sum(sizes.values())
    assert _line(out, "denoiser:") == (f"denoiser:   2 experts switched by timestep, {_fmt_bytes(total)} of "
                                       "parameters in all"), out
    for comp in ("transformer", "transformer_2"):
        assert _line(out, f"  {comp}:") == (f"  {comp}: {_fmt_bytes(sizes[comp])} of parameters (2 stacked blocks, "
                                            f"{_fmt_bytes(blocks[comp])} in blocks)"), out
    assert _line(out, "per device:").startswith(f"per device: ~{_fmt_bytes(total)} "
                                                "of DiT weights (all weights resident")
    assert "all 2 experts stay loaded" in out and "transformer_2/" in _line(out, "files:")


def test_stacked_groups_are_summed_from_block_counts(tmp_path):
    b = expected_bytes(2, 1)
    out = _toy_plan(tmp_path, 2, 1)
    in_blocks = b["double_blocks"] + b["single_blocks"]
    assert _line(out, "denoiser:") == (
        f"denoiser:   {_fmt_bytes(sum(b.values()))} of parameters (3 stacked blocks: double_blocks 2 + "
        f"single_blocks 1, {_fmt_bytes(in_blocks)} in blocks)")


def test_offload_estimate_streams_two_chunks_of_each_group(tmp_path):
    b = expected_bytes(8, 6)
    out = _toy_plan(tmp_path, 8, 6, "offload.enabled=true", "offload.chunk_size=2")
    # non-block params + 2 chunks of 2 blocks of each group: 4/8 of the double blocks, 4/6 of the single blocks
    resident = b["other"] + b["double_blocks"] * 4 // 8 + b["single_blocks"] * 4 // 6
    assert resident < sum(b.values())
    line = _line(out, "per device:")
    assert line.startswith(f"per device: ~{_fmt_bytes(resident)} of DiT weights (offload: non-block params + "
                           "2 chunks of 2 block(s) of each streamed group"), line
    assert _line(out, "offload:") == "offload:    on, chunk 2 (double_blocks, single_blocks)"
    # a chunk that does not divide a group is the real run's one-line error
    with pytest.raises(Exception, match=r"offload.chunk_size=4 must divide the 6 blocks of group 'single_blocks'"):
        _toy_plan(tmp_path, 8, 6, "offload.enabled=true", "offload.chunk_size=4")


TWO_DEVICES = {"XLA_FLAGS": xla_flags(2)}
TINY = ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.num_frames=1",
        "sampling.num_steps=2", "parallel.sp=2", "output.path=", "prompt=a fox"]


def test_sequence_parallel_must_divide_the_video_tokens(tmp_path):
    # 48 x 48 pixels -> latent 6 x 6 -> 3 x 3 patches = 9 video tokens: sp=2 cannot split them
    odd = [*TINY, "sampling.height=48", "sampling.width=48"]
    dry = vidax("run", *odd, "--dry-run", env=TWO_DEVICES, cwd=tmp_path, timeout=300)
    real = vidax("run", *odd, env=TWO_DEVICES, cwd=tmp_path, timeout=300)
    for proc in (dry, real):
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [[ln for ln in p.stderr.splitlines() if ln.startswith("error: ")] for p in (dry, real)]
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines  # the same check, the same words
    assert "parallel.sp=2 must divide the 9 video tokens" in lines[0][0]
    # 32 x 32 -> 2 x 2 patches = 4 tokens: fine, and the dry run says how many it checked
    ok = vidax("run", *TINY, "sampling.height=32", "sampling.width=32", "--dry-run", env=TWO_DEVICES, cwd=tmp_path,
               timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert _line(ok.stdout, "tokens:") == "tokens:     4 video tokens (latent 1x4x4, patch 1x2x2)"
    assert "sp=2" in _line(ok.stdout, "mesh:")


def test_activation_estimate_uses_the_checkpoint_widths_and_the_mesh(a14b):
    """The widths come from the torch reference's own config (model width, ffn_dim); the formula is the one
    vidax_core.placement.activations documents, evaluated here by hand for sp 1 and sp 2."""
    import json
    import math

    folder, _, _ = a14b
    t = json.loads((folder / "transformer" / "config.json").read_text())
    d, m = t["num_attention_heads"] * t["attention_head_dim"], t["ffn_dim"]
    text = 16
    for sp in (1, 2):
        proc = vidax("run", "model.id=wan2.2-t2v-a14b", f"model.checkpoint={folder}", *SMALL, "--dry-run",
                     "parallel.dp=1", f"parallel.sp={sp}", f"sampling.max_sequence_length={text}", env=TWO_DEVICES,
                     timeout=300)
        assert proc.returncode == 0, proc.stderr
        tokens = 2 * (32 // 16) * (32 // 16)  # latent 2x4x4, patch 1x2x2
        local = math.ceil(tokens / sp)
        want = 2 * 2 * (local + text) * d * 4 + max(4 * 2 * (tokens + text) * math.ceil(d / sp) * 4,
                                                    2 * 2 * local * m * 4)
        line = _line(proc.stdout, "activations:")
        assert line.startswith(f"activations: ~{_fmt_bytes(want)} per device inside one block"), line
        assert f"width {d}, attention {d}, MLP {m}" in line, line


LTX = ["model.id=ltx-video-13b-0.9.8-dev", "model.checkpoint=builtin:tiny-random", "prompt=a fox", "output.path="]


def test_every_pass_of_a_multi_pass_recipe_is_checked(tmp_path):
    # The LTX recipe at 144x144, 1 frame: a first pass at 96x96 (latent 1x3x3 = 9 tokens), then 192x192 (36 tokens).
    # sp=2 splits the second pass but not the first: the dry run refuses as the real run does, in the same words.
    odd = [*LTX, "sampling.height=144", "sampling.width=144", "sampling.num_frames=1", "parallel.sp=2",
           "parallel.dp=1"]
    dry = vidax("run", *odd, "--dry-run", env=TWO_DEVICES, cwd=tmp_path, timeout=300)
    real = vidax("run", *odd, env=TWO_DEVICES, cwd=tmp_path, timeout=300)
    lines = [[ln for ln in p.stderr.splitlines() if ln.startswith("error: ")] for p in (dry, real)]
    assert dry.returncode == real.returncode == 2 and lines[0] == lines[1] and len(lines[0]) == 1, lines
    assert "parallel.sp=2 must divide the 9 video tokens" in lines[0][0]
    demo = str(Path(__file__).resolve().parents[1] / "configs" / "ltx_demo.yaml")  # passes at 64x64, 128x128
    ok = vidax("run", demo, "output.path=", "--dry-run", cwd=tmp_path, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert _line(ok.stdout, "pass 1/2:").startswith("pass 1/2:   17 frames at 64x64, 10 steps of ")
    assert _line(ok.stdout, "pass 2/2:").startswith("pass 2/2:   17 frames at 128x128, 4 steps of ")
    assert _line(ok.stdout, "tokens:").startswith("tokens:     48 video tokens (latent 3x4x4")


def test_a_dry_run_writes_nothing_into_the_cache(tmp_path, monkeypatch, capsys):
    """--dry-run wrote 1.5 MB into the cache (a pyramid Helios id's built-in checkpoint, generated on first use):
    a dry run writes nothing; the run itself still generates it into the cache."""
    from vidax_core import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    args = ["run", "model.id=helios-mid", "model.checkpoint=builtin:tiny-random", "sampling.height=64",
            "sampling.width=64", "sampling.num_frames=9", "--dry-run"]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_chunk_size_map_naming_no_group_is_refused_with_offload_off(tmp_path, capsys):
    """offload.chunk_size maps with unknown groups were accepted when offload was off."""
    from vidax_core import cli

    demo = str(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")
    code = cli.main(["run", demo, "offload.chunk_size={blockz: 2}", "--dry-run"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and err == ["error: offload.chunk_size names blockz, not a block group of wan2.1-t2v-1.3b "
                                 "(groups: blocks)"], err


def test_latents_of_several_streams_are_not_saved_under_a_npy_name(capsys):
    """output.save_latents=lat.npy wrote an .npz under a .npy name (LTX-2.5: video and audio latents)."""
    from vidax_core import cli

    demo = str(Path(__file__).resolve().parents[1] / "configs" / "ltx2_demo.yaml")
    code = cli.main(["run", demo, "output.save_latents=lat.npy", "--dry-run"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "give a path ending in .npz" in err[0], err
