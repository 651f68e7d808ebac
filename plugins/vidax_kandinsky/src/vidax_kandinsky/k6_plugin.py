"""The Kandinsky 6 plugin object (``kandinsky6-ti2va-*``): a second entry point of this package beside
:class:`vidax_kandinsky.plugin.KandinskyPlugin` (Kandinsky 5), with which it shares the Qwen2.5-VL + CLIP prompt
encoders (:mod:`.text`, under Kandinsky 6's :class:`~.text.PromptFormat`) and the HunyuanVideo VAE.

Run semantics are those of diffusers' ``Kandinsky6TI2VAPipeline``: the prompt's Qwen2.5-VL last hidden state (its
template cropped at 129 tokens) and pooled CLIP-L text; classifier-free guidance ``uncond + g (cond - uncond)`` on
both streams when ``guidance_scale`` > 1; the checkpoint's scheduler on each stream (flow Euler, or PiFlow for the
distilled checkpoints: :mod:`vidax_core.schedulers.piflow`); the fused video+audio DiT (:mod:`.k6_dit`) over two
latent streams (:mod:`.k6_conditioning`: layouts, the image's reference tail); the HunyuanVideo VAE and MMAudio's
audio VAE and vocoder (:mod:`.k6_autoencoder`). Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype

from . import k6_presets


def _k6_format():
    from .text import PromptFormat

    return PromptFormat(template=k6_presets.PROMPT_TEMPLATE, crop=k6_presets.CROP_START, clean=False, fit=False)


class Kandinsky6Plugin(FamilyPlugin):
    family = "kandinsky"
    models = k6_presets.MODELS
    options = k6_presets.OPTIONS
    dit_config_class = ".k6_dit:Kandinsky6DiTConfig"
    dit_rules = ".k6_convert:K6_DIT_RULES"
    checks = ".k6_checks"
    diffusers_reference = ".k6_bench_reference:Kandinsky6DiffusersReference"

    def _audio(self, ckpt, run):
        """(audio channels, latent frames -> audio latent frames), or None for a video-only run."""
        if not run.options.get("sample_audio", True) or not ckpt.has("audio_vae"):
            return None
        from vidax_core.audio.mmaudio import MMAudioVAEConfig

        from .k6_conditioning import audio_frames

        c = MMAudioVAEConfig.from_config(ckpt.config("audio_vae"))
        rate = float(run.options.get("frame_rate", k6_presets.FRAME_RATE))
        t = k6_presets.TEMPORAL
        return c.latent_channels, lambda f: audio_frames((f - 1) * t + 1, t, rate, c.sample_rate, c.latent_hop_length)

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild

        from .k6_conditioning import example_inputs, latent_shapes
        from .k6_dit import Kandinsky6DiT
        from .k6_flops import counter

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        audio = self._audio(ckpt, run)
        shapes = latent_shapes(cfg.in_visual_dim, audio)
        return DitBuild.of(Kandinsky6DiT, cfg, in_channels=cfg.in_visual_dim, heads=cfg.heads,
                           patch_size=cfg.patch_size,
                           block_counts={"video_text_blocks": cfg.num_text_blocks,
                                         "audio_text_blocks": cfg.num_text_blocks,
                                         "visual_blocks": cfg.num_visual_blocks},
                           latent_shapes=shapes, flops=counter(cfg, audio[1] if audio else (lambda f: 0)),
                           example_inputs=functools.partial(example_inputs, cfg, shapes))

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """Qwen2.5-VL (in the run's weight dtype, tensor-parallel over tp when tp > 1) and CLIP-L text."""
        from . import text

        return text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode_for_run(encoder, prompts, run, _k6_format())

    def build_vae(self, spec, ckpt, run):
        from .k6_autoencoder import load

        return load(ckpt, run)

    def vae_latent_shape(self, spec, ckpt, run):
        from vidax_core.vae.hunyuan_video import latent_grid

        s = run.sampling
        return latent_grid(ckpt.config("vae"), s.num_frames, s.height, s.width) if ckpt.has("vae") else None

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .k6_conditioning import prepare

        return prepare(run, vae, latent_shape, self.dit_config(ckpt))

    def frame_stages(self, spec, ckpt, run):
        """``options.super_resolution``: the frames through that SR id (``Kandinsky6SRPipeline`` after the
        generation) at ``options.sr_resolution_scale``, from ``options.sr_checkpoint`` or its own hub repo. The
        stage's noise draws are the ``noise_0``, ``noise_1``, ... of an .npz ``sampling.initial_noise`` beside
        the generation's ``video`` and ``audio``, else its seeded draws."""
        o = run.options
        if not o.get("super_resolution"):
            return None
        from vidax_core import FrameStage
        from vidax_core.io.noise import is_zip, npz_shapes

        s = run.sampling
        overrides = {"sampling": {"height": s.height, "width": s.width, "num_frames": s.num_frames},
                     "options": {"resolution_scale": float(o.get("sr_resolution_scale", 2.25))},
                     "output": {"fps": run.output.fps}}
        if o.get("sr_checkpoint"):
            overrides["model"] = {"checkpoint": o["sr_checkpoint"]}
        noise = s.initial_noise
        if noise and is_zip(noise) and "noise_0" in npz_shapes(noise):
            overrides["sampling"]["initial_noise"] = noise
        return [FrameStage(o["super_resolution"], overrides, name="super-resolution")]

    def builtin_checkpoint(self, spec, name):
        return super().builtin_checkpoint(spec, f"k6-{name}")  # beside Kandinsky 5's own tiny-random


