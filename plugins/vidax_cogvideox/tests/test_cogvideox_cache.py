"""Step caching on tiny CogVideoX-5B (CogVideoXPipeline, classifier-free guidance) against diffusers' cached runs.

The blocks carry text and video tokens together; the residuals and the first-block test are taken on the video
tokens, and FirstBlockCache caches the text tokens' tail residual too, as diffusers' hooks do for blocks that
return both. Both guidance branches share one ``"cond_uncond"`` context. Latents within 1e-4 relative, equal
skip lists, each cached run far from the uncached one. TeaCache (TeaCache4CogVideoX1.5, whose signal is the time
embedding, so the schedule is known before the first step) skips the steps of its reference rule re-implemented
here in float64 from the diffusers model's weights, with the shipped polynomial and with one of the test's own.
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


# a linear rescale whose accumulated distances (0.74 | 0.99 0.63 | 1.03 ... on this model) cross the threshold
# far from it; the shipped 5B polynomial is negative on this random model's distances and skips every middle step
TEA = {"coefficients": [1.0, 0.0], "threshold": 1.5}


def teacache_reference(transformer, timesteps, coefficients, threshold) -> list[int]:
    """TeaCache4CogVideoX1.5's ``teacache_forward`` decision in float64: the relative L1 change of the time
    embedding ``emb`` (sinusoid, then the time MLP) rescaled by the polynomial accumulates until it reaches the
    threshold; the first and last steps always compute. Returns the skipped steps."""
    cfg = transformer.config
    te = transformer.time_embedding
    def lin(layer, x):
        return x @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()

    def silu(x):
        return x / (1 + np.exp(-x))

    half = cfg.num_attention_heads * cfg.attention_head_dim // 2

    def emb(t):
        angles = t * np.exp(-np.log(10000.0) * np.arange(half) / (half - cfg.freq_shift))
        parts = [np.sin(angles), np.cos(angles)]
        e = np.concatenate(parts[::-1] if cfg.flip_sin_to_cos else parts)
        return lin(te.linear_2, silu(lin(te.linear_1, e)))

    poly, n = np.poly1d(coefficients), len(timesteps)
    acc, prev, skipped = 0.0, None, []
    for cnt, t in enumerate(timesteps):
        e = emb(float(t))
        if cnt == 0 or cnt == n - 1:
            acc = 0.0
        else:
            acc += poly(np.abs(e - prev).mean() / np.abs(prev).mean())
            if acc < threshold:
                skipped.append(cnt)
            else:
                acc = 0.0
        prev = e
    return skipped


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
        plain = p(cache=None).latents
        tea = p(cache={"method": "teacache", **TEA})
        shipped = p(cache={"method": "teacache"})  # the published 5B polynomial, threshold 0.2
    from vidax_core.cache import tables
    from vidax_core.testing.parity import rel_l2

    timesteps = np.asarray(pipe.scheduler.timesteps, np.float64)  # the schedule the references just ran
    want = teacache_reference(pipe.transformer, timesteps, TEA["coefficients"], TEA["threshold"])
    assert want == [1, 3], want  # not degenerate: some middle steps compute
    assert tea.metrics["cache"]["skipped_steps"] == want
    assert rel_l2(tea.latents, plain) > 10 * TOL
    want = teacache_reference(pipe.transformer, timesteps, tables.TEACACHE_COEFFICIENTS["cogvideox-5b"][False], 0.2)
    assert shipped.metrics["cache"]["skipped_steps"] == want == [1, 2, 3, 4]
