"""Step caching on tiny LTX-Video (LTXPipeline, classifier-free guidance) against diffusers' own cached runs.

LTXPipeline batches the negative and positive branch into one transformer call in one cache context
(``"cond_uncond"``), so its cache statistics span both branches and both skip together: vidax's LTX layout
declares the same (``CacheLayout(contexts="call")``). Latents within 1e-4 relative, equal skip lists, and each
cached run far from the uncached one. TeaCache4LTX-Video, whose signal is the first block's modulated input (so
it is decided on the device inside the step), matches its reference rule re-implemented here in float64 on
diffusers' model (:func:`vidax_core.testing.step_cache.teacache_hook`: its decision replacing MagCache's in
diffusers' head-block hook, which then skips the stack).
"""

from __future__ import annotations

import numpy as np

from vidax_core.testing.cli import overrides
from vidax_core.testing.step_cache import Recorder, check_against_diffusers, teacache_hook
from vidax_core.testing.tiny.ltx import build_tiny_ltx_pipeline

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, FRAMES, STEPS, FPS = 64, 17, 6, 24
FBC_THRESHOLD = 0.35
MAG_RATIOS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
TEA_THRESHOLD = 0.5
TOL = 1e-4


TEA = {"coefficients": [1.0, 0.0], "threshold": TEA_THRESHOLD}


def ltx_modulated(module, hidden, temb):
    """TeaCache4LTX-Video's signal: ``norm1(x) * (1 + scale_msa) + shift_msa`` of the first block."""
    b = hidden.shape[0]
    ada = module.scale_shift_table[None, None].double() + temb.double().reshape(b, temb.size(1), 6, -1)
    return module.norm1(hidden).double() * (1 + ada[:, :, 1]) + ada[:, :, 0]


def test_ltx_cache_matches_diffusers(tmp_path, monkeypatch):
    import torch

    import vidax

    torch.manual_seed(0)
    pipe = build_tiny_ltx_pipeline("t2v", seed=3)
    ckpt = tmp_path / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    tokens = ((FRAMES - 1) // 8 + 1) * (SIZE // 32) ** 2
    noise = np.random.default_rng(0).standard_normal((1, tokens, 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    rec = Recorder(monkeypatch)

    def reference(config):
        out = rec.run([pipe.transformer], config, lambda: pipe(
            prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
            num_inference_steps=STEPS, guidance_scale=3.0, guidance_rescale=0.0, frame_rate=FPS,
            decode_timestep=0.05, decode_noise_scale=0.0, max_sequence_length=16,
            latents=torch.from_numpy(noise), output_type="latent").frames)
        return np.asarray(out, np.float32), rec.skipped("cond_uncond")

    args = [f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}",
            *overrides(sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=3.0,
                                     max_sequence_length=16, scheduler=None),
                       options=dict(timesteps=None, frame_rate=FPS, guidance_rescale=0.0, decode_timestep=0.05,
                                    decode_noise_scale=0.0, pipeline="ltx", multiscale=False)),
            f"sampling.initial_noise={tmp_path / 'noise.npy'}", "output.path=null"]
    with vidax.load("ltx-video-13b-0.9.8-dev", *args) as p:
        cases = check_against_diffusers(rec, reference, p, steps=STEPS, fbc_threshold=FBC_THRESHOLD,
                                        mag_ratios=MAG_RATIOS, tol=TOL)
        tea = p(cache={"method": "teacache", **TEA})
    plain, _ = reference(None)
    calls: list = []
    with monkeypatch.context() as m:
        tea_ref, _ = reference(teacache_hook(m, STEPS, TEA["coefficients"], TEA["threshold"], ltx_modulated, calls))
    from vidax_core.testing.parity import rel_l2

    skipped = [k for k, (_, computed, _) in enumerate(calls) if not computed]
    assert len(calls) == STEPS and 0 < len(skipped) < STEPS - 2, calls  # not degenerate
    acc = np.cumsum([d for _, _, d in calls[1:-1]])  # the accumulator before its first reset: clear of the threshold
    assert np.abs(acc - TEA_THRESHOLD).min() > 0.02, calls
    assert tea.metrics["cache"]["skipped_steps"] == skipped, calls
    assert rel_l2(tea.latents, tea_ref) < TOL and rel_l2(tea_ref, plain) > 10 * TOL
    for name, (out, skips) in cases.items():  # one cache context for the batched call, as diffusers' cond_uncond
        report = out.metrics["cache"]
        assert report["contexts"] == ["cond+uncond"]
        assert report["branches"]["cond"]["skipped_steps"] == report["branches"]["uncond"]["skipped_steps"] == skips
