"""The LTX-2.5 diffusion video decoder (``options.video_decoder=diffusion``) against diffusers 0.42.1.

Component: :mod:`vidax_ltx.ltx2_diffusion_decode` on a tiny random ``LTX2VideoDiffusionDecoderModel`` (every
parameter random, the published stage layout at 64 -> 32 channels, NATTEN windows that shift at every border of
every stage) from the same noise as the reference's ``decode(generator=...)``: one x0 step (how LTX-2.5 ships) with
the token-chunked path, two Euler steps of the x0 model and of a velocity model. The layouts (tp x sp, offload + sp)
equal one device; the published configuration is checked key for key against the reference built on the meta
device; a grid smaller than a stage's neighborhood and a ``decoder_0`` of the wrong shape are one-line errors. End
to end, ``vidax run`` with the decoder (its ``decoder_0`` replayed) is checked against the reference's calls in
test_ltx2_two_stage.py, on the distilled two-stage recipe.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.tiny.ltx2 import (DIFFUSION_DECODER, build_tiny_diffusion_decoder,  # noqa: E402
                                          use_dense_neighborhood_attention)

pytestmark = pytest.mark.xdist_group("ltx2_diffusion_decoder")

H, W, F = 64, 96, 9  # latents 2 x 2 x 3: the smallest video whose every stage grid holds the tiny kernels


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The tiny reference decoder (saved as a ``diffusion_decoder/`` folder too) with its flex mask evaluated
    densely under SDPA: the same attention, 7x faster on a CPU."""
    folder = tmp_path_factory.mktemp("ltx2_dd") / "diffusion_decoder"
    model = build_tiny_diffusion_decoder(folder, seed=7)
    use_dense_neighborhood_attention(model)
    return model, folder


def _vidax(reference, output_type="x0"):
    from vidax_ltx import ltx2_diffusion_decode as dd
    from vidax_ltx.ltx2_diffusion_decoder import LTX2DiffusionDecoderConfig

    cfg = LTX2DiffusionDecoderConfig.from_config({**DIFFUSION_DECODER, "decoder_model_output_type": output_type})
    return dd.load(cfg, {k: v.numpy() for k, v in reference.state_dict().items()})


@pytest.mark.parametrize("output_type, steps, chunk", [("x0", 1, 500), ("x0", 2, None), ("v", 2, None)])
def test_decoder_matches_reference(reference, monkeypatch, output_type, steps, chunk):
    """``chunk``: the token-wise layers in 500-token chunks (a fori_loop and a remainder in most stages)."""
    from vidax_ltx import ltx2_diffusion_decode as dd
    from vidax_ltx import ltx2_diffusion_decoder as ddm

    ref, _ = reference
    if chunk:
        monkeypatch.setattr(ddm, "TOKEN_CHUNK", chunk)
    monkeypatch.setattr(ref.decoder, "model_output_type", output_type)
    z = torch.randn((1, 8, 2, 2, 3), generator=torch.Generator().manual_seed(steps))
    with torch.no_grad():
        want = ref.decode(z, generator=torch.Generator().manual_seed(1), num_inference_steps=steps).sample.numpy()
    noise = torch.randn(want.shape, generator=torch.Generator().manual_seed(1)).numpy()
    got = dd.decode(_vidax(ref, output_type), z.numpy(), lambda k, shape: noise, steps=steps)
    err = rel_l2(got, want)
    print(f"diffusion decoder ({output_type}, {steps} step(s), chunk {chunk}): rel L2 {err:.2e}, max abs "
          f"{np.abs(got - want).max():.2e}")
    assert got.shape == want.shape == (1, 3, F, H, W)
    assert err < 1e-5


def test_published_decoder_layout():
    """The published configuration (the reference's defaults) built abstractly: every key and shape of
    ``LTX2VideoDiffusionDecoderModel`` on the meta device lands on a vidax parameter, and its grids at 512x768,
    121 frames are the reference's (stage 5 on 121 x 128 x 192 tokens)."""
    from diffusers.models.autoencoders import LTX2VideoDiffusionDecoderModel

    from vidax_core.testing.reference import check_full_size
    from vidax_ltx.ltx2_diffusion_decoder import (DECODER_IGNORED, DECODER_RULES, LTX2DiffusionDecoder,
                                                  LTX2DiffusionDecoderConfig)

    cfg = LTX2DiffusionDecoderConfig()
    size = check_full_size(LTX2VideoDiffusionDecoderModel, DECODER_RULES, lambda: LTX2DiffusionDecoder(cfg),
                           component="diffusion_decoder", ignore=DECODER_IGNORED, label="published diffusion decoder",
                           params=(4.0e8, 4.3e8))
    assert set(size.dropped) == {"latents_mean", "latents_std"}
    assert cfg.grids(16, 16, 24) == [(18, 16, 24), (18, 32, 48), (35, 32, 48), (69, 64, 96), (121, 128, 192)]
    assert cfg.grid_problems(16, 16, 24) == [] and cfg.grid_problems(2, 1, 1)


def test_layouts_equal_one_device(reference):
    """tp x sp (heads and MLP width of every stage over tp, a grid axis of every volume over sp) and offload + sp
    (host weights placed a unit at a time) give one device's frames on 8 fake CPU devices; ``parallel.tp=8`` runs
    the decoder at tp 4, the largest divisor of its head counts (8, 4, 4, 4, 4)."""
    from pathlib import Path

    from vidax_core.testing.devices import run_script

    out = run_script(Path(__file__).parent / "parallel_scripts" / "diffusion_decoder_mesh.py", reference[1],
                     highest=True, timeout=900)
    for name, r in out.items():
        print(name, r)
    runs = {k: r for k, r in out.items() if isinstance(r, dict) and "max_abs" in r}
    assert out["devices"] == 8 and set(runs) == {"single", "tp2sp2", "offload_sp2"}
    assert all(r["max_abs"] < 1e-4 for r in runs.values())
    assert runs["tp2sp2"]["mesh"] == {"dp": 1, "sp": 2, "tp": 2}
    assert runs["tp2sp2"]["q_kernel_spec"] == "P(None, None, 'tp')"  # stacked (layers, in, out): out over tp
    assert runs["tp2sp2"]["weight_bytes_per_device"] < 0.7 * runs["single"]["weight_bytes_per_device"]
    assert runs["tp2sp2"]["context_spec"] == runs["offload_sp2"]["context_spec"] == "P(None, None, 'sp')"
    assert runs["offload_sp2"]["host_weights"] and not runs["tp2sp2"]["host_weights"]
    assert out["tp8_mesh"] == {"dp": 1, "sp": 1, "tp": 4}


def test_bad_decoder_inputs(reference, tmp_path, capsys, monkeypatch):
    """Refused in one line before anything loads (the CLI in-process): a grid below a stage's neighborhood, a
    decoder draw of the wrong shape. (A checkpoint without ``diffusion_decoder/`` is a row of
    tests/test_bad_input.py.)"""
    import shutil

    from vidax_core import cli
    from vidax_core.testing.assets import writable_asset

    ckpt = writable_asset("vidax_ltx", tmp_path / "ckpt", "ltx2-tiny-random")
    shutil.copytree(reference[1], ckpt / "diffusion_decoder")
    monkeypatch.chdir(tmp_path)
    base = ["run", "model.id=ltx-2.5-22b-dev", f"model.checkpoint={ckpt}", "prompt=a fox", "sampling.num_frames=9",
            "options.video_decoder=diffusion", "options.spatio_temporal_guidance_blocks=[1]", "--dry-run", "--quiet"]
    np.savez(tmp_path / "bad.npz", video=np.zeros((1, 8, 2, 2, 3), np.float32),
             audio=np.zeros((1, 4, 9, 4), np.float32), decoder_0=np.zeros((1, 3, F, H, W - 32), np.float32))
    cases = {
        "small": (["sampling.height=32", "sampling.width=96"],
                  "the diffusion decoder's stage 2 works on a (4, 2, 6) grid, smaller than its (3, 3, 3)"),
        "draw": ([f"sampling.height={H}", f"sampling.width={W}", f"sampling.initial_noise={tmp_path / 'bad.npz'}"],
                 "decoder_0 has shape (1, 3, 9, 64, 64), this run's decoder draws (1, 3, 9, 64, 96)"),
    }
    for name, (extra, want) in cases.items():
        assert cli.main(base + extra) == 2, name
        lines = capsys.readouterr().err.strip().splitlines()
        print(name, lines[-1])
        assert len(lines) == 1 and lines[0].startswith("error:") and want in lines[0], (name, lines)
