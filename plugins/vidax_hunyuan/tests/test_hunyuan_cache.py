"""Step caching on tiny HunyuanVideo (HunyuanVideoPipeline, real classifier-free guidance) against diffusers'
own cached runs.

Both block groups (double- and single-stream) carry the video and text tokens apart, as diffusers' blocks do; the
residuals and the first-block test are taken on the video tokens. The pipeline runs the two guidance branches in
separate ``"cond"`` / ``"uncond"`` cache contexts, each with its own state. Latents within 1e-4 relative, equal
per-branch skip lists, each cached run far from the uncached one. TeaCache4HunyuanVideo, whose signal is the
first double block's modulated video input (decided on the device inside the step), matches its reference rule
in float64 on diffusers' model per branch (:func:`vidax_core.testing.step_cache.teacache_hook`).
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import overrides
from vidax_core.testing.parity import rel_l2
from vidax_core.testing.step_cache import Recorder, teacache_hook
from vidax_core.testing.tiny.hunyuan import build_tiny_hunyuan_pipeline

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
H, W, FRAMES, STEPS, GUIDANCE, TRUE_CFG, TEXT = 32, 32, 5, 6, 6.0, 3.0, 300
FBC_THRESHOLD = 0.99  # at step 3 the branches' head-residual changes are 1.009 (cond) and 0.977 (uncond)
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
TEA = {"coefficients": [1.0, 0.0], "threshold": 0.5}
TOL = 1e-4


def hunyuan_modulated(module, hidden, temb):
    """TeaCache4HunyuanVideo's signal: the first double block's ``img_norm1`` output modulated by ``img_mod``'s
    msa shift and scale, which is diffusers' ``norm1(hidden, emb=temb)[0]``."""
    return module.norm1(hidden, emb=temb)[0]


@pytest.mark.long
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
        tea = p(cache={"method": "teacache", **TEA})
    calls: list = []
    with monkeypatch.context() as m:
        config = teacache_hook(m, STEPS, TEA["coefficients"], TEA["threshold"], hunyuan_modulated, calls)
        tea_ref, _ = reference(config)
    tea_skips = {b: [k for k, (_, c, _) in enumerate(x for x in calls if x[0] == b) if not c]
                 for b in ("cond", "uncond")}
    cases["teacache"] = (tea, tea_ref, tea_skips)
    assert all(0 < len(v) < STEPS - 2 for v in tea_skips.values()), calls  # not degenerate
    for branch in ("cond", "uncond"):  # each accumulator stays clear of the threshold (0.35 | 0.35+0.55 | ...)
        d = [x[2] for x in calls if x[0] == branch][1:-1]
        assert abs(d[0] - TEA["threshold"]) > 0.05 and abs(d[0] + d[1] - TEA["threshold"]) > 0.05, calls
    for name, (out, ref, skips) in cases.items():
        assert rel_l2(out.latents, ref) < TOL, name
        assert rel_l2(ref, plain) > 10 * TOL, name
        for branch in ("cond", "uncond"):
            assert out.metrics["cache"]["branches"][branch]["skipped_steps"] == skips[branch], (name, branch, diffs)
