"""The official LTX-2.x distilled recipe in two stages (``options.two_stage: true``), as one run.

diffusers' LTX-2 docs and ltx-core's distilled pipeline chain three calls; vidax runs them as passes of one run
(prompts encoded once, the DiT loaded once; core hook ``sampling_passes``):

1. ``LTX2Pipeline`` at half the requested height and width with the run's sigmas (the distilled eight),
   ``output_type="latent"``;
2. ``LTX2LatentUpsamplePipeline(latents=video, output_type="latent")``: the LTX-2 latent upsampler doubles the raw
   video latents' height and width (:mod:`vidax_ltx.upsampler`; no AdaIN, no tone mapping);
3. ``LTX2Pipeline(latents=upsampled video, audio_latents=stage-1 audio)`` at the requested size with
   ``sigmas=options.stage_2_sigmas`` (``STAGE_2_DISTILLED_SIGMA_VALUES``: 0.909375, 0.725, 0.421875) and
   ``noise_scale`` = ``options.stage_2_noise_scale`` (null: the first of those sigmas): both streams normalised,
   then ``s * noise + (1 - s) * latents`` (the pipeline's ``_create_noised_state``).

The third call's two draws are vidax's own (``fold_in(key(seed), 300)`` for the video tokens, ``301`` for the
audio), or, when ``sampling.initial_noise`` is an ``.npz`` holding them, its ``video_1`` and ``audio_1`` members in
the layout the pipeline draws them: packed tokens, (1, F*H*W, C) and (1, L, C*M) at the second stage's size.
JAX is imported only where a pass runs (the run checks import this module).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vidax_core.errors import UserError
from vidax_core.model_api import SamplingPass

from .ltx2_presets import STAGE_2_SIGMAS

DRAWS = ("video_1", "audio_1")  # the second call's draws, in its order


def stage_sizes(height: int, width: int) -> tuple[int, int]:
    return height // 2, width // 2


def upsampler_problems(ckpt: Any, options: dict) -> list[str]:
    """Before anything loads: the recipe needs a latent upsampler that opens (``options.spatial_upsampler``, the
    checkpoint's ``latent_upsampler/`` or an ``*spatial-upscaler*.safetensors`` beside its files)."""
    from .multiscale import find_upsampler, layout_only
    from .upsampler import check_upsampler_file

    path = find_upsampler(ckpt, options)
    if path is not None and layout_only(ckpt, options, path):
        return []
    if path is None:
        return [f"options.two_stage needs the LTX-2 latent upsampler and {ckpt.source} has none: set "
                "options.spatial_upsampler=<its latent_upsampler folder or ltx-2-spatial-upscaler file>, or "
                "options.two_stage=false for one stage"]
    try:
        check_upsampler_file(path)
    except (UserError, OSError) as exc:
        return [str(exc)]
    return []


def run_problems(run: Any) -> list[str]:
    s, o = run.sampling, run.options
    out = []
    if s.height % 64 or s.width % 64:
        out.append(f"options.two_stage runs its first stage at half the size, so sampling.height and width must be "
                   f"multiples of 64, got {s.width}x{s.height}: use {s.width // 64 * 64 or 64}x"
                   f"{s.height // 64 * 64 or 64}")
    if run.image is not None:
        out.append("options.two_stage is the text-to-video recipe: remove image: or set options.two_stage=false")
    sig = o.get("stage_2_sigmas") or []
    if not sig or any(not 0.0 < float(x) <= 1.0 for x in sig) or any(a <= b for a, b in zip(sig, sig[1:])):
        out.append("options.stage_2_sigmas must be a non-empty, strictly decreasing list in (0, 1], e.g. "
                   f"{STAGE_2_SIGMAS}")
    scale = o.get("stage_2_noise_scale")
    if scale is not None and not 0.0 <= float(scale) <= 1.0:
        out.append(f"options.stage_2_noise_scale must be in [0, 1], got {scale}")
    return out


def passes(ckpt: Any, run: Any) -> list[SamplingPass]:
    from .multiscale import find_upsampler

    o, s = dict(run.options), run.sampling
    h1, w1 = stage_sizes(s.height, s.width)
    one = {**o, "two_stage": False}
    first = dataclasses.replace(run, sampling=dataclasses.replace(s, height=h1, width=w1), options=one)
    sigmas = [float(x) for x in o["stage_2_sigmas"]]
    noise_scale = float(sigmas[0] if o.get("stage_2_noise_scale") is None else o["stage_2_noise_scale"])
    # the mix happens in carry (its draws may come from the run's .npz), so the pass takes the latents as they are
    second = dataclasses.replace(run, sampling=dataclasses.replace(s, num_steps=len(sigmas)),
                                 options={**one, "sigmas": sigmas, "noise_scale": 0.0})
    path = find_upsampler(ckpt, o)
    if path is None:  # check_checkpoint refuses this before anything loads
        raise UserError("options.two_stage needs options.spatial_upsampler")
    problems = draw_problems(s.initial_noise, *token_shapes(ckpt, run))
    if problems:
        raise UserError(problems[0])

    def carry(latents, vae):
        import numpy as np

        from .ltx2_conditioning import Streams
        from .upsampler import open_upsampler, upsample

        video = upsample(open_upsampler(path), latents["video"])
        streams = Streams(vae)
        v, a = streams.tokens({"video": video, "audio": latents["audio"]})
        nv, na = second_draws(run, v.shape, a.shape)
        v = noise_scale * nv + (1.0 - noise_scale) * v
        a = noise_scale * na + (1.0 - noise_scale) * a
        grid = tuple(int(x) for x in video.shape[2:])
        raw = streams.raw(v, a, grid, tuple(int(x) for x in np.shape(latents["audio"])[1:]))
        return {k: np.asarray(x, np.float32) for k, x in raw.items()}

    return [SamplingPass(first, name=f"stage 1/2 ({w1}x{h1})"),
            SamplingPass(second, name=f"stage 2/2 ({s.width}x{s.height})", carry=carry)]


def token_shapes(ckpt: Any, run: Any) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The packed shapes of the second stage's video and audio tokens, (1, F*H*W, C) and (1, L, C*M)."""
    from .ltx2_audio import audio_latent_frames
    from .ltx2_audio_vae import LTX2AudioVAEConfig
    from .ltx2_vae import LTX2VAEConfig

    s = run.sampling
    vc = LTX2VAEConfig.from_config(ckpt.config("vae"))
    ac = LTX2AudioVAEConfig.from_config(ckpt.config("audio_vae"))
    t, sp = int(vc.temporal_compression_ratio), int(vc.spatial_compression_ratio)
    tokens = ((s.num_frames - 1) // t + 1) * (s.height // sp) * (s.width // sp)
    frames = audio_latent_frames(ac, s.num_frames, float(run.options["frame_rate"]))
    return (1, tokens, int(vc.latent_channels)), (1, frames, int(ac.latent_channels) * int(ac.latent_mel_bins))


def draw_problems(path: str | None, video: tuple[int, ...], audio: tuple[int, ...]) -> list[str]:
    """An ``.npz`` that holds one of the second call's draws holds both, in the packed shapes of this run."""
    from vidax_core.io.noise import npz_shapes

    found = npz_shapes(path) if path else {}
    if not any(d in found for d in DRAWS):
        return []
    for name, want in zip(DRAWS, (video, audio)):
        if tuple(found.get(name, ())) != tuple(want):
            return [f"sampling.initial_noise {path}: {name} (the second stage's draw) must be {tuple(want)} (packed "
                    f"tokens), got {found.get(name, 'nothing')}"]
    return []


def second_draws(run: Any, video: tuple[int, ...], audio: tuple[int, ...]) -> tuple[Any, Any]:
    """The second call's noise for the video and audio tokens: the run's ``.npz`` members, or vidax's draws."""
    import jax
    import jax.numpy as jnp

    from vidax_core.io.noise import load_npz_draw

    path = run.sampling.initial_noise
    out = []
    for i, (name, shape) in enumerate(zip(DRAWS, (video, audio))):
        given = load_npz_draw(path, name, tuple(shape)) if path else None
        if given is None:
            given = jax.random.normal(jax.random.fold_in(jax.random.key(run.sampling.seed), 300 + i), shape)
        out.append(jnp.asarray(given, jnp.float32))
    return out[0], out[1]


__all__ = ["DRAWS", "STAGE_2_SIGMAS", "draw_problems", "passes", "run_problems", "second_draws", "stage_sizes",
           "upsampler_problems"]
