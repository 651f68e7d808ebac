"""The LTX-2.5 diffusion video decoder (``options.video_decoder=diffusion``) against diffusers 0.42.1.

Component: :mod:`vidax_ltx.ltx2_diffusion_decode` on a tiny random ``LTX2VideoDiffusionDecoderModel`` (every
parameter random, the published stage layout at 64 -> 32 channels, NATTEN windows that shift at every border of
every stage) from the same noise as the reference's ``decode(generator=...)``: one x0 step (how LTX-2.5 ships),
three Euler steps, a velocity model, and the token-chunked path. End to end: ``vidax run`` of a tiny LTX-2.5
checkpoint with a ``diffusion_decoder/`` folder against ``LTX2Pipeline(output_type="latent")`` followed by
``LTX2VideoDiffusionDecodePipeline(denormalize=False)``, the decoder's noise replayed from the ``decoder_0`` member
of the ``.npz``; frames within 5e-3. The published configuration is checked key for key against the reference
built on the meta device; a grid smaller than a stage's neighborhood and a ``decoder_0`` of the wrong shape are
one-line errors.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.tiny.ltx2 import (DIFFUSION_DECODER, build_tiny_diffusion_decoder,  # noqa: E402
                                          use_dense_neighborhood_attention)

pytestmark = pytest.mark.xdist_group("ltx2_diffusion_decoder")

ENTRY = ("ltx2", "vidax_ltx.ltx2_plugin:LTX2Plugin")
H, W, F = 64, 96, 9  # latents 2 x 2 x 3: the smallest video whose every stage grid holds the tiny kernels
PROMPT, NEGATIVE = "a small red fox barks in the snow", "blurry"
BOUND = 5e-3  # frames, max abs (the bound); the runs land near 1e-5


def _reference(**kw):
    model = build_tiny_diffusion_decoder(**kw)
    use_dense_neighborhood_attention(model)  # its flex mask densely under SDPA: the same attention, 7x faster on CPU
    return model


@pytest.fixture(scope="module")
def reference():
    return _reference(seed=7)


@pytest.fixture(scope="module")
def decoder(reference):
    from vidax_ltx import ltx2_diffusion_decode as dd
    from vidax_ltx.ltx2_diffusion_decoder import LTX2DiffusionDecoderConfig

    cfg = LTX2DiffusionDecoderConfig.from_config(DIFFUSION_DECODER)
    return dd.load(cfg, {k: v.numpy() for k, v in reference.state_dict().items()})


def _decode_both(reference, model, steps, seed=0):
    from vidax_ltx import ltx2_diffusion_decode as dd

    z = torch.randn((1, 8, 2, 2, 3), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = reference.decode(z, generator=torch.Generator().manual_seed(seed + 1),
                                num_inference_steps=steps).sample.numpy()
    noise = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed + 1)).numpy()
    got = dd.decode(model, z.numpy(), lambda k, shape: noise, steps=steps)
    return got, want


@pytest.mark.parametrize("steps", [1, 2])
def test_decoder_matches_reference(reference, decoder, steps):
    got, want = _decode_both(reference, decoder, steps)
    err = rel_l2(got, want)
    print(f"diffusion decoder, {steps} step(s): rel L2 {err:.2e}, max abs {np.abs(got - want).max():.2e}")
    assert got.shape == want.shape == (1, 3, F, H, W)
    assert err < 1e-5


def test_velocity_model_and_token_chunks_match_reference(reference, monkeypatch):
    """``decoder_model_output_type="v"`` (Euler on the prediction itself) and the chunked token-wise layers (chunks
    of 500 tokens: a fori_loop and a remainder in most stages)."""
    from vidax_ltx import ltx2_diffusion_decode as dd
    from vidax_ltx import ltx2_diffusion_decoder as ddm

    ref = _reference(seed=8, decoder_model_output_type="v")
    cfg = ddm.LTX2DiffusionDecoderConfig.from_config({**DIFFUSION_DECODER, "decoder_model_output_type": "v"})
    model = dd.load(cfg, {k: v.numpy() for k, v in ref.state_dict().items()})
    monkeypatch.setattr(ddm, "TOKEN_CHUNK", 500)
    got, want = _decode_both(ref, model, 2, seed=3)
    err = rel_l2(got, want)
    print(f"velocity model, 2 steps, 500-token chunks: rel L2 {err:.2e}")
    assert err < 2e-5


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


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny LTX-2.5 pipeline with a diffusion decoder: the reference's two calls, and vidax's run of the same."""
    from diffusers.pipelines.ltx2.pipeline_ltx2_diffusion_decode import LTX2VideoDiffusionDecodePipeline

    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

    tmp = tmp_path_factory.mktemp("ltx2_dd")
    pipe, ckpt = build_tiny_ltx2_pipeline(tmp / "tiny", "ltx2.5", seed=3)
    dec = build_tiny_diffusion_decoder(ckpt / "diffusion_decoder", seed=7)
    use_dense_neighborhood_attention(dec)
    rng = np.random.default_rng(0)
    noise = {"video": rng.standard_normal((1, 8, 2, H // 32, W // 32)).astype(np.float32),
             "audio": rng.standard_normal((1, 4, 9, 4)).astype(np.float32)}
    with torch.no_grad():
        latents = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=F, num_inference_steps=2,
                       frame_rate=24.0, max_sequence_length=16, spatio_temporal_guidance_blocks=[1],
                       latents=torch.from_numpy(noise["video"]), audio_latents=torch.from_numpy(noise["audio"]),
                       output_type="latent").frames
        decode = LTX2VideoDiffusionDecodePipeline(diffusion_decoder=dec, scheduler=pipe.scheduler)
        decode.set_progress_bar_config(disable=True)
        frames = decode(latents, generator=torch.Generator().manual_seed(11), output_type="np",
                        denormalize=False).frames
    noise["decoder_0"] = torch.randn((1, 3, F, H, W), generator=torch.Generator().manual_seed(11)).numpy()
    env = plugin_env(tmp / "entry", *ENTRY)
    args = run_args("ltx-2.5-22b-dev", ckpt, PROMPT, NEGATIVE,
                    sampling=dict(num_steps=2, height=H, width=W, num_frames=F, max_sequence_length=16),
                    options=dict(spatio_temporal_guidance_blocks=[1], video_decoder="diffusion"))
    run = run_e2e(tmp / "run", *args, noise=noise, env=env)
    return dict(tmp=tmp, ckpt=ckpt, env=env, args=args, noise=noise, latents=latents.numpy(),
                frames=np.asarray(frames, np.float32), run=run)


def test_cli_matches_the_two_reference_calls(tiny_run):
    run, frames = tiny_run["run"], tiny_run["frames"]
    lat = rel_l2(run.latents["video"], tiny_run["latents"])
    err = float(np.abs(run.frames - frames).max())
    print(f"LTX-2.5 + diffusion decoder: video latents rel L2 {lat:.2e}, frames max abs {err:.2e}")
    assert run.frames.shape == frames.shape == (1, F, H, W, 3)
    assert lat < 1e-4 and err < BOUND
    assert {c["backend"] for c in run.metrics["attention_calls"].values()} >= {"neighborhood_blockwise"}


def test_bad_decoder_inputs(tiny_run, tmp_path, capsys, monkeypatch):
    """Refused in one line before anything loads (the CLI in-process): a grid below a stage's neighborhood, a
    decoder draw of the wrong shape. (A checkpoint without ``diffusion_decoder/`` is a row of
    tests/test_bad_input.py.)"""
    from vidax_core import cli

    monkeypatch.chdir(tmp_path)
    base = ["run", "model.id=ltx-2.5-22b-dev", f"model.checkpoint={tiny_run['ckpt']}", "prompt=a fox",
            "sampling.num_frames=9", "options.video_decoder=diffusion", "options.spatio_temporal_guidance_blocks=[1]",
            "sampling.max_sequence_length=16", "--dry-run", "--quiet"]
    np.savez(tmp_path / "bad.npz", **{**tiny_run["noise"], "decoder_0": np.zeros((1, 3, F, H, W - 32), np.float32)})
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


def test_layouts_equal_one_device(tiny_run):
    """tp x sp (heads and MLP width of every stage over tp, a grid axis of every volume over sp) and offload + sp
    (host weights placed a unit at a time) give one device's frames on 8 fake CPU devices; ``parallel.tp=8`` runs
    the decoder at tp 4, the largest divisor of its head counts (8, 4, 4, 4, 4)."""
    from pathlib import Path

    from vidax_core.testing.devices import run_script

    out = run_script(Path(__file__).parent / "parallel_scripts" / "diffusion_decoder_mesh.py",
                     tiny_run["ckpt"] / "diffusion_decoder", highest=True, timeout=900)
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
