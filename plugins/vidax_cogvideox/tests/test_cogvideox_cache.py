"""Step caching on tiny CogVideoX-5B (CogVideoXPipeline, classifier-free guidance) against diffusers' cached runs.

The blocks carry text and video tokens together; the residuals and the first-block test are taken on the video
tokens, and FirstBlockCache caches the text tokens' tail residual too, as diffusers' hooks do for blocks that
return both. Both guidance branches share one ``"cond_uncond"`` context. Latents within 1e-4 relative, equal
skip lists, each cached run far from the uncached one.
"""

from __future__ import annotations

import numpy as np

from vidax_core.testing.cli import overrides
from vidax_core.testing.step_cache import Recorder, check_against_diffusers
from vidax_core.testing.tiny.cogvideox import (
    LATENT_CHANNELS,
    TEXT_LEN,
    build_tiny_cogvideox_pipeline,
    save_pipeline,
)

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, FRAMES, STEPS = 32, 9, 6
FBC_THRESHOLD = 0.25
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
TOL = 1e-4


def test_cogvideox_cache_matches_diffusers(tmp_path, monkeypatch):
    import torch

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
        seen = {}

        def grab(p, i, t, kw):
            seen["latents"] = kw["latents"].detach().clone()
            return {}

        rec.run([pipe.transformer], config, lambda: pipe(
            prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
            num_inference_steps=STEPS, guidance_scale=6.0, use_dynamic_cfg=False, max_sequence_length=TEXT_LEN,
            latents=torch.from_numpy(noise), output_type="latent", callback_on_step_end=grab))
        return seen["latents"].numpy().astype(np.float32), rec.skipped("cond_uncond")

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}",
            *overrides(sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=6.0,
                                     max_sequence_length=TEXT_LEN), options=dict(use_dynamic_cfg=False)),
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    with vidax.load("cogvideox-5b", *args) as p:
        check_against_diffusers(rec, reference, p, steps=STEPS, fbc_threshold=FBC_THRESHOLD, mag_ratios=MAG_RATIOS,
                                tol=TOL)
