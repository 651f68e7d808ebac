"""Resolution binning (diffusers' ``use_resolution_binning``; vidax_core.binning and the ``resolution_binning``
hook): the bin picked for a size is diffusers' ``classify_height_width_bin``'s on SANA-Video's 480p and 720p tables,
the cover-and-crop resize is ``resize_and_crop_tensor``'s, and a run of the contract toy with a bin samples at the
bin (its latents are a run at that size's) and writes the requested size (those frames, covered and cropped)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.binning import ResolutionBins, cover_and_crop

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")


def test_bins_are_the_pipelines_choice():
    from diffusers.pipelines.sana_video.pipeline_sana_video import ASPECT_RATIO_480_BIN, ASPECT_RATIO_720_BIN
    from diffusers.video_processor import VideoProcessor

    for table in (ASPECT_RATIO_480_BIN, ASPECT_RATIO_720_BIN):
        bins = ResolutionBins.of(table)
        for h in range(64, 1500, 37):
            for w in range(64, 1500, 41):
                assert bins.closest(h, w) == VideoProcessor.classify_height_width_bin(h, w, ratios=table), (h, w)
    assert ResolutionBins.of(ASPECT_RATIO_480_BIN).closest(480, 832) == (480, 832)


@pytest.mark.parametrize("src, dst", [((24, 40), (20, 36)), ((16, 16), (30, 22)), ((40, 24), (24, 40))])
def test_cover_and_crop_is_resize_and_crop_tensor(src, dst):
    from diffusers.video_processor import VideoProcessor

    frames = np.random.default_rng(0).random((2, 3, *src, 3)).astype(np.float32)
    want = VideoProcessor.resize_and_crop_tensor(torch.from_numpy(frames).permute(0, 4, 1, 2, 3), dst[1], dst[0])
    want = want.permute(0, 2, 3, 4, 1).numpy()
    got = cover_and_crop(frames, *dst)
    assert got.shape == want.shape == (2, 3, *dst, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_a_binned_run_samples_at_the_bin_and_writes_the_requested_size(tmp_path):
    from vidax_core import config as config_mod
    from vidax_core.plugins import Plugins
    from vidax_core.runner import loaded
    from vidax_core.runner.plan import plan_lines
    from vidax_core.report.progress import Reporter
    from vidax_core.testing import contract_plugin as toy

    p = Plugins()
    toy.register(p)
    ckpt = toy.make_checkpoint(str(tmp_path / "toy"))

    def run(*over):
        cfg = config_mod.resolve(None, [f"model.id={toy.ID}", f"model.checkpoint={ckpt}", "prompt=a red fox",
                                        "output.path=null", *over], p.preset_for)
        return loaded.run(cfg, p, Reporter(quiet=True)), cfg

    binned, cfg = run("sampling.height=8", "sampling.width=8", "options.bin=[12, 16]")
    direct, _ = run("sampling.height=12", "sampling.width=16")
    np.testing.assert_array_equal(np.asarray(binned.latents), np.asarray(direct.latents))
    assert binned.frames.shape[2:4] == (8, 8)
    np.testing.assert_allclose(binned.frames, cover_and_crop(direct.frames, 8, 8), rtol=0, atol=1e-7)
    model = loaded.LoadedModel(cfg, p, Reporter(quiet=True))
    plan = model.plan_call(cfg)
    model.close()
    assert plan.resize == "cover_crop" and plan.passes[0].run.sampling.height == 12
    assert any(line.startswith("binning:") and "16x12" in line and "8x8" in line for line in plan_lines(plan))
