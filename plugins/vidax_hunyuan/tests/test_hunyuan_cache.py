"""Step caching on tiny HunyuanVideo (HunyuanVideoPipeline, real classifier-free guidance) against diffusers'
own cached runs.

Both block groups (double- and single-stream) carry the video and text tokens apart, as diffusers' blocks do; the
residuals and the first-block test are taken on the video tokens. The pipeline runs the two guidance branches in
separate ``"cond"`` / ``"uncond"`` cache contexts, each with its own state. Latents within 1e-4 relative, equal
per-branch skip lists, each cached run far from the uncached one.
"""

from __future__ import annotations

import numpy as np

from vidax_core.testing.cli import overrides
from vidax_core.testing.parity import rel_l2
from vidax_core.testing.step_cache import Recorder
from vidax_core.testing.tiny.hunyuan import build_tiny_hunyuan_pipeline

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
H, W, FRAMES, STEPS, GUIDANCE, TRUE_CFG, TEXT = 32, 32, 5, 6, 6.0, 3.0, 300
FBC_THRESHOLD = 0.99  # at step 3 the branches' head-residual changes are 1.009 (cond) and 0.977 (uncond)
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
TOL = 1e-4


def test_hunyuan_cache_matches_diffusers(tmp_path, monkeypatch):
    import torch
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    import vidax

    pipe = build_tiny_hunyuan_pipeline(seed=3)
    ckpt = tmp_path / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    noise = np.random.default_rng(0).standard_normal((1, 4, (FRAMES - 1) // 4 + 1, H // 8, W // 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    rec = Recorder(monkeypatch)

    def reference(config):
        out = rec.run([pipe.transformer], config, lambda: pipe(
            prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES,
            num_inference_steps=STEPS, guidance_scale=GUIDANCE, true_cfg_scale=TRUE_CFG, max_sequence_length=TEXT,
            latents=torch.from_numpy(noise), output_type="latent").frames)
        return np.asarray(out, np.float32), {n: rec.skipped(n) for n in ("cond", "uncond")}

    plain, _ = reference(None)
    fbc_ref, fbc_skips = reference(FirstBlockCacheConfig(threshold=FBC_THRESHOLD))
    diffs = list(rec.diffs)
    mag_ref, mag_skips = reference(MagCacheConfig(num_inference_steps=STEPS, mag_ratios=MAG_RATIOS))
    assert all(fbc_skips.values()) and all(mag_skips.values()), (fbc_skips, mag_skips, diffs)
    assert fbc_skips["cond"] != fbc_skips["uncond"], diffs  # per-branch state is exercised
    assert all(abs(d - FBC_THRESHOLD) > 2e-3 for _, d in diffs if d is not None), diffs  # no knife-edge step

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}",
            *overrides(sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES, guidance_scale=GUIDANCE,
                                     max_sequence_length=TEXT), options=dict(true_cfg_scale=TRUE_CFG)),
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    with vidax.load("hunyuanvideo-t2v-13b", *args) as p:
        cases = {"first_block": (p(cache={"method": "first_block", "threshold": FBC_THRESHOLD}), fbc_ref, fbc_skips),
                 "mag": (p(cache={"method": "mag", "mag_ratios": MAG_RATIOS}), mag_ref, mag_skips)}
    for name, (out, ref, skips) in cases.items():
        assert rel_l2(out.latents, ref) < TOL, name
        assert rel_l2(ref, plain) > 10 * TOL, name
        for branch in ("cond", "uncond"):
            assert out.metrics["cache"]["branches"][branch]["skipped_steps"] == skips[branch], (name, branch, diffs)
