"""Step caching on tiny CogVideoX-5B (CogVideoXPipeline, classifier-free guidance) against diffusers' cached runs.

The blocks carry text and video tokens together; the residuals and the first-block test are taken on the video
tokens, and FirstBlockCache caches the text tokens' tail residual too, as diffusers' hooks do for blocks that
return both. Both guidance branches share one ``"cond_uncond"`` context. Latents within 1e-4 relative, equal
skip lists, each cached run far from the uncached one.
"""

from __future__ import annotations

import numpy as np

from vidax_core.testing.cli import overrides
from vidax_core.testing.parity import rel_l2
from vidax_core.testing.step_cache import Recorder
from vidax_core.testing.tiny.cogvideox import LATENT_CHANNELS, TEXT_LEN, build_tiny_cogvideox_pipeline, save_pipeline

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, FRAMES, STEPS = 32, 9, 6
FBC_THRESHOLD = 0.25
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
TOL = 1e-4


def test_cogvideox_cache_matches_diffusers(tmp_path, monkeypatch):
    import torch
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    import vidax

    torch.manual_seed(0)
    pipe = build_tiny_cogvideox_pipeline("5b", seed=3)
    ckpt = tmp_path / "ckpt"
    save_pipeline(pipe, ckpt)
    shape = (1, (FRAMES - 1) // 4 + 1, LATENT_CHANNELS, SIZE // 8, SIZE // 8)
    noise = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    rec = Recorder(monkeypatch)

    def reference(config):
        rec.calls.clear()
        rec.diffs.clear()
        seen = {}

        def grab(p, i, t, kw):
            seen["latents"] = kw["latents"].detach().clone()
            return {}

        if config is not None:
            pipe.transformer.enable_cache(config)
        pipe(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
             num_inference_steps=STEPS, guidance_scale=6.0, use_dynamic_cfg=False, max_sequence_length=TEXT_LEN,
             latents=torch.from_numpy(noise), output_type="latent", callback_on_step_end=grab)
        if config is not None:
            pipe.transformer.disable_cache()
        return seen["latents"].numpy().astype(np.float32), rec.skipped("cond_uncond")

    plain, _ = reference(None)
    fbc_ref, fbc_skips = reference(FirstBlockCacheConfig(threshold=FBC_THRESHOLD))
    diffs = list(rec.diffs)
    mag_ref, mag_skips = reference(MagCacheConfig(threshold=0.06, max_skip_steps=3, retention_ratio=0.2,
                                                  num_inference_steps=STEPS, mag_ratios=MAG_RATIOS))
    assert fbc_skips and len(fbc_skips) < STEPS - 1, diffs
    assert all(abs(d - FBC_THRESHOLD) > 2e-3 for _, d in diffs if d is not None), diffs
    assert mag_skips

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}",
            *overrides(sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=6.0,
                                     max_sequence_length=TEXT_LEN), options=dict(use_dynamic_cfg=False)),
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    with vidax.load("cogvideox-5b", *args) as p:
        cases = {"first_block": (p(cache={"method": "first_block", "threshold": FBC_THRESHOLD}), fbc_ref, fbc_skips),
                 "mag": (p(cache={"method": "mag", "mag_ratios": MAG_RATIOS}), mag_ref, mag_skips)}
    for name, (out, ref, skips) in cases.items():
        err, moved = rel_l2(out.latents, ref), rel_l2(ref, plain)
        assert err < TOL, (name, err)
        assert moved > 10 * TOL, (name, moved)
        assert out.metrics["cache"]["skipped_steps"] == skips, (name, out.metrics["cache"])
