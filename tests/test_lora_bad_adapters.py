"""Malformed adapters (``lora:``): each is one ``error:`` line (exit 2) from ``vidax run``, raised before any
denoiser weight is converted or placed (``load_dit`` is replaced by a tripwire), and ``--dry-run`` finds them too.

The adapters are written by the test for the Wan built-in tiny checkpoint (width 24, FFN 32, 2 blocks)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from vidax_core import cli

DIM, FFN = 24, 32
SMALL = ["model.id=wan2.1-t2v-1.3b", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
         "sampling.num_steps=2", "sampling.max_sequence_length=8"]


def tiny_ckpt() -> str:
    import vidax_wan

    return os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")


def save(path, tensors, metadata=None):
    from vidax_core.testing.lora import save_adapter

    return save_adapter(path, tensors, metadata)


def pair(name, down=(4, DIM), up=(DIM, 4), prefix="diffusion_model.", a="lora_down", b="lora_up"):
    rng = np.random.default_rng(0)
    return {f"{prefix}{name}.{a}.weight": rng.normal(0, 0.1, down).astype(np.float32),
            f"{prefix}{name}.{b}.weight": rng.normal(0, 0.1, up).astype(np.float32)}


GOOD = pair("blocks.0.self_attn.q")


def two_experts(t) -> str:
    """The tiny checkpoint with a second (identical) denoiser: a Wan2.2 A14B layout."""
    dst = t / "a14b"
    shutil.copytree(tiny_ckpt(), dst)
    shutil.copytree(dst / "transformer", dst / "transformer_2")
    index = json.loads((dst / "model_index.json").read_text())
    index.update(transformer_2=["diffusers", "WanTransformer3DModel"], boundary_ratio=0.875)
    (dst / "model_index.json").write_text(json.dumps(index))
    return str(dst)


def truncated(path):
    save(path, GOOD)
    raw = path.read_bytes()
    path.write_bytes(raw[:-40])
    return str(path)


def lora(*entries):
    return "lora=[" + ", ".join("{" + ", ".join(f"{k}: {v}" for k, v in e.items()) + "}" for e in entries) + "]"


def one(t, tensors, **entry):
    return [lora({"path": save(t / "a.safetensors", tensors), **entry})]


def nan():
    bad = dict(GOOD)
    k = next(iter(bad))
    bad[k] = bad[k].copy()
    bad[k][0, 0] = np.nan
    return bad


# (case, setup(tmp) -> extra args, fragment of the error line)
CASES = [
    ("unknown-keys", lambda t: one(t, {**GOOD, **pair("blocks.7.self_attn.q"), **pair("blocks.0.self_attn.zz")}),
     "2 modules map to no parameter of wan2.1-t2v-1.3b: diffusion_model.blocks.0.self_attn.zz"),
    ("wrong-shape", lambda t: one(t, pair("blocks.0.ffn.0", down=(4, DIM), up=(DIM, 4))),
     "delta up @ down (24, 24) does not fit blocks.0.ffn.net.0.proj.weight (32, 24)"),
    ("rank-mismatch", lambda t: one(t, pair("blocks.0.self_attn.q", up=(DIM, 3))), "rank 4 but its up matrix"),
    ("nan", lambda t: one(t, nan()), "holds NaN or infinite values"),
    ("another-family", lambda t: one(t, pair("transformer_blocks.0.attn1.to_q", prefix="transformer.", a="lora_A",
                                             b="lora_B")), "is it an adapter for another model?"),
    ("truncated", lambda t: [lora({"path": truncated(t / "a.safetensors")})], "truncated"),
    ("dora", lambda t: one(t, {**GOOD, "diffusion_model.blocks.0.self_attn.q.dora_scale": np.ones((DIM, 1))}),
     "DoRA (dora_scale / magnitude vectors) is not supported"),
    ("expert-missing", lambda t: [f"model.checkpoint={two_experts(t)}", "model.id=wan2.2-t2v-a14b",
                                  lora({"path": save(t / "a.safetensors", GOOD)})],
     "wan2.2-t2v-a14b has 2 experts (high_noise, low_noise): set lora[0].expert"),
    ("expert-unknown", lambda t: [f"model.checkpoint={two_experts(t)}", "model.id=wan2.2-t2v-a14b",
                                  lora({"path": save(t / "a.safetensors", GOOD), "expert": "middle"})],
     "lora[0].expert=middle is not an expert of wan2.2-t2v-a14b"),
    ("expert-on-one-denoiser", lambda t: one(t, GOOD, expert="high_noise"), "has one denoiser; remove lora[0].expert"),
    ("missing-file", lambda t: [lora({"path": t / "nope.safetensors"})], "nope.safetensors does not exist"),
    ("not-safetensors", lambda t: [(t / "a.pt").write_bytes(b"\x80\x02pickle"), lora({"path": t / "a.pt"})][1:],
     "is not a .safetensors file"),
    ("garbage", lambda t: [(t / "g.safetensors").write_bytes(b"x" * 64), lora({"path": t / "g.safetensors"})][1:],
     "corrupt or truncated safetensors header"),
    ("alpha-shape", lambda t: one(t, {**GOOD, "diffusion_model.blocks.0.self_attn.q.alpha": np.ones(3)}),
     "alpha of shape (3,), expected one number"),
    ("down-without-up", lambda t: one(t, {k: v for k, v in GOOD.items() if "down" in k}), "has no matching up matrix"),
    ("no-tensors", lambda t: one(t, {}), "holds no tensors"),
    ("text-encoder", lambda t: one(t, {**GOOD, **pair("encoder.block.0.q", prefix="text_encoder.")}),
     "text-encoder keys"),
    ("bias-shape", lambda t: one(t, {**GOOD, "diffusion_model.blocks.0.self_attn.q.diff_b": np.ones(5)}),
     "does not fit blocks.0.attn1.to_q.bias (24,)"),
    ("not-a-lora-part", lambda t: one(t, {**GOOD, "diffusion_model.blocks.0.self_attn.q.hada_w1_a": np.ones(3)}),
     "keys that are no LoRA part"),
    ("folder-of-two", lambda t: [save(t / "d" / "x.safetensors", GOOD) if (t / "d").mkdir() is None else 0,
                                 save(t / "d" / "y.safetensors", GOOD), lora({"path": t / "d"})][2:],
     "holds 2 .safetensors files: name the file with weight_name"),
    ("not-a-list", lambda t: [f"lora={{path: {save(t / 'a.safetensors', GOOD)}}}"], "config key lora must be a list"),
    ("unknown-entry-key", lambda t: one(t, GOOD, strength=1.0), "unknown config key lora[0].strength"),
    ("scale-not-a-number", lambda t: one(t, GOOD, scale="big"), "config key lora[0].scale must be a number"),
]


def run_cli(args, tmp_path, capfd, dry=False):
    argv = ["run", *args, f"runtime.compilation_cache_dir={tmp_path / 'jc'}",
            f"output.path={tmp_path / 'new' / 'o.mp4'}", "--quiet", *(["--dry-run"] if dry else [])]
    code = cli.main(argv)
    _, err = capfd.readouterr()
    return code, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_adapter_is_one_error_line_before_weights(case, tmp_path, capfd, monkeypatch):
    from vidax_core.runner import pipeline

    def tripwire(*a, **k):
        raise AssertionError("a denoiser weight was loaded before the adapter was refused")

    monkeypatch.setattr(pipeline, "load_dit", tripwire)
    monkeypatch.chdir(tmp_path)
    _, setup, fragment = case
    extra = [str(a) for a in setup(tmp_path)]
    args = [*SMALL, f"model.checkpoint={tiny_ckpt()}", *extra] if not any("checkpoint" in a for a in extra) else [
        *SMALL, *extra]
    code, lines = run_cli(args, tmp_path, capfd)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines[0]
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("unknown-keys", "dora", "expert-missing", "nan")],
                         ids=lambda c: c[0])
def test_dry_run_finds_bad_adapters(case, tmp_path, capfd):
    _, setup, fragment = case
    extra = [str(a) for a in setup(tmp_path)]
    args = [*SMALL, f"model.checkpoint={tiny_ckpt()}", *extra] if not any("checkpoint" in a for a in extra) else [
        *SMALL, *extra]
    code, lines = run_cli(args, tmp_path, capfd, dry=True)
    assert code == 2 and len(lines) == 1 and fragment in lines[0], lines


def test_dry_run_describes_a_good_adapter(tmp_path, capfd):
    path = save(tmp_path / "a.safetensors", {**GOOD, "diffusion_model.blocks.0.self_attn.q.alpha": np.float32(8)})
    code = cli.main(["run", *SMALL, f"model.checkpoint={tiny_ckpt()}", lora({"path": path, "scale": 0.5}),
                     "--dry-run"])
    out, _ = capfd.readouterr()
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("lora:  "))
    assert "original layout, 1 modules of transformer, rank 4, alpha 8, scale 0.5" in line, line


def test_lora_inspect(tmp_path, capfd):
    """``vidax lora inspect`` names the layout, each module's checkpoint name, rank, alpha and factor; with
    ``--checkpoint`` it resolves kohya names and refuses a bad adapter as a run does."""
    good = save(tmp_path / "k.safetensors", {
        "lora_unet_blocks_1_cross_attn_o.lora_down.weight": np.ones((2, DIM)),
        "lora_unet_blocks_1_cross_attn_o.lora_up.weight": np.ones((DIM, 2)),
        "lora_unet_blocks_1_cross_attn_o.alpha": np.float32(1)})
    assert cli.main(["lora", "inspect", good, "wan2.1-t2v-1.3b", f"--checkpoint={tiny_ckpt()}"]) == 0
    out, _ = capfd.readouterr()
    assert "kohya / musubi-tuner" in out
    row = next(x for x in out.splitlines() if x.startswith("blocks_1_cross_attn_o"))
    assert row.split()[:5] == ["blocks_1_cross_attn_o", "blocks.1.attn2.to_out.0", "2", "1", "0.5"], row
    bad = save(tmp_path / "b.safetensors", pair("blocks.0.self_attn.q", up=(DIM, 3)))
    assert cli.main(["lora", "inspect", bad, "wan2.1-t2v-1.3b"]) == 2
    _, err = capfd.readouterr()
    assert err.count("\n") == 1 and "rank 4 but its up matrix" in err, err


def test_dry_run_routes_adapters_to_experts(tmp_path, capfd):
    """On a two-expert model each adapter goes to the denoiser its ``expert`` names."""
    a = save(tmp_path / "high.safetensors", GOOD)
    b = save(tmp_path / "low.safetensors", pair("blocks.1.ffn.2", down=(2, FFN), up=(DIM, 2)))
    code = cli.main(["run", *SMALL, "model.id=wan2.2-t2v-a14b", f"model.checkpoint={two_experts(tmp_path)}",
                     lora({"path": a, "expert": "high_noise"}, {"path": b, "expert": "low_noise", "scale": 0.3}),
                     "--dry-run"])
    out, err = capfd.readouterr()
    assert code == 0, err
    lines = [x for x in out.splitlines() if x.startswith("lora:  ")]
    assert len(lines) == 2
    assert "1 modules of transformer, rank 4" in lines[0] and "1 modules of transformer_2, rank 2" in lines[1], lines
    assert "scale 0.3" in lines[1]


def test_adapter_paths(tmp_path, monkeypatch):
    """A folder gives its ``pytorch_lora_weights.safetensors`` (diffusers' name), its only file, or the
    ``weight_name`` file; a hub repo id that cannot be fetched is one line naming the file."""
    from vidax_core.errors import UserError
    from vidax_core.lora.files import locate

    (tmp_path / "d").mkdir()
    want = save(tmp_path / "d" / "pytorch_lora_weights.safetensors", GOOD)
    save(tmp_path / "d" / "other.safetensors", GOOD)
    assert locate(str(tmp_path / "d"), None, "lora[0]") == want
    assert locate(str(tmp_path / "d"), "other.safetensors", "lora[0]") == str(tmp_path / "d" / "other.safetensors")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # read at import: setenv is too late
    with pytest.raises(UserError) as err:
        locate("SomeOrg/some-lora", "x/y.safetensors", "lora[1]")
    assert ("lora[1]: hub repo SomeOrg/some-lora is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
            "download x/y.safetensors") in str(err.value)
    assert "\n" not in str(err.value)
