"""The LTX-2.x plugin object (``ltx-2.5-22b-dev``, ``ltx-2.5-22b-distilled``, ``ltx-2-19b-dev``): a second entry
point of this package beside :class:`vidax_ltx.plugin.LTXPlugin` (LTX-Video); the core hands each id's hooks to the
object that registered it.

Run semantics are those of diffusers' ``LTX2Pipeline`` (text-to-video with audio): Gemma hidden states through the
text connectors (:mod:`.ltx2_text`), the joint audio-video DiT (:mod:`.ltx2_dit`) over two latent streams
(:mod:`.ltx2_conditioning`: layouts, normalisation, RoPE positions), flow Euler over ``linspace(1, 1/N, N)`` (or
``options.sigmas``) with ``mu`` from the video token count, guidance in the clean-sample space
(:mod:`.ltx2_guidance`), the video VAE, audio VAE and vocoder (:mod:`.ltx2_autoencoder`). The LTX-2.5 diffusers
repository holds the distilled DiT in ``transformer/`` and the dev one in ``transformer_full/``: the dev id reads
the latter when the checkpoint has it; the original release folders read through :mod:`.ltx2_release`. Registering
imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, TextLayerReader, dit_weight_dtype

from . import ltx2_presets


class LTX2Plugin(FamilyPlugin):
    family = "ltx"
    models = ltx2_presets.MODELS
    options = ltx2_presets.OPTIONS
    checkpoint_formats = ("diffusers", "ltx2-original")
    dit_components = ("transformer", "transformer_full")
    dit_config_class = ".ltx2_dit:LTX2DiTConfig"
    dit_rules = ".convert_ltx2:LTX2_DIT_RULES"
    diffusers_reference = ".ltx2_bench_reference:LTX2DiffusersReference"
    # an original LTX-2.x release folder (LTX-2.5's one file per part, LTX-2.0's single file + Gemma-3 folders)
    original_format = ".ltx2_release:open_release"
    # ComfyUI's LTX-2.0 files (a models folder, or model.files): the release file and Comfy-Org's Gemma-3
    files_format = ".ltx2_files:open_files"
    # the connectors read all of Gemma's hidden states (layers + the embeddings): a random checkpoint with a cut
    # Gemma scales them with it
    text_layer_readers = (TextLayerReader("connectors", "text_proj_in_factor",
                                          r"(video_|audio_)?text_proj_in\.weight", offset=1),)

    def _component(self, spec, ckpt) -> str:
        return "transformer_full" if spec.id in ltx2_presets.DEV_IDS and ckpt.has("transformer_full") \
            else "transformer"

    def _dit(self, spec, ckpt, **overrides):
        from .ltx2_dit import LTX2DiTConfig

        return LTX2DiTConfig.from_config(ckpt.config(self._component(spec, ckpt)), **overrides)

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild

        from .ltx2_audio_vae import LTX2AudioVAEConfig
        from .ltx2_conditioning import conditioning_frame_rate, example_inputs, latent_shapes
        from .ltx2_dit import LTX2DiT
        from .ltx2_flops import counter
        from .ltx2_vae import LTX2VAEConfig

        cfg = self._dit(spec, ckpt, dtype=dit_weight_dtype(run))
        temporal = int(LTX2VAEConfig.from_config(ckpt.config("vae")).temporal_compression_ratio)
        shapes = latent_shapes(LTX2AudioVAEConfig.from_config(ckpt.config("audio_vae")), cfg.in_channels,
                               float(run.options["frame_rate"]), temporal)
        return DitBuild.of(LTX2DiT, cfg, in_channels=cfg.in_channels, component=self._component(spec, ckpt),
                           heads=cfg.num_attention_heads, patch_size=(1, 1, 1),
                           block_counts={"blocks": cfg.num_layers}, latent_shapes=shapes,
                           flops=counter(cfg, shapes),
                           example_inputs=functools.partial(example_inputs, cfg, shapes, conditioning_frame_rate(run)))

    def scheduler(self, spec, ckpt, run):
        """The dev recipe's dynamic shifting and ``shift_terminal`` over the checkpoint's scheduler config."""
        if spec.id not in ltx2_presets.DEV_IDS:
            return None
        from vidax_core.schedulers.base import sampler_from_scheduler_config

        return sampler_from_scheduler_config({**ckpt.config("scheduler"), **ltx2_presets.DEV_SCHEDULER})

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        """Sigmas ``linspace(1, 1/N, N)`` (or ``options.sigmas``) and ``mu`` from the video token count with the
        checkpoint's scheduler config (the pipeline's defaults where it lacks a key), applied when the sampler
        shifts dynamically."""
        import numpy as np

        from vidax_core.schedulers.base import calculate_shift

        n = int(run.sampling.num_steps)
        sigmas = run.options.get("sigmas")
        out = {"sigmas": [float(s) for s in sigmas] if sigmas else np.linspace(1.0, 1.0 / n, n)}
        if getattr(sampler, "use_dynamic_shifting", False):
            c = {**ltx2_presets.SHIFT_DEFAULTS, **(ckpt.config("scheduler") if ckpt.has("scheduler") else {})}
            f, h, w = latent_shape
            out["mu"] = calculate_shift(f * h * w, c["base_image_seq_len"], c["max_image_seq_len"],
                                        c["base_shift"], c["max_shift"])
        return out

    def guidance(self, spec, ckpt, run):
        from .ltx2_guidance import guidance

        return guidance(run, self._dit(spec, ckpt).num_layers)

    def check_run(self, spec, run):
        from .ltx2_checks import run_problems

        return run_problems(spec, run)

    def check_checkpoint(self, spec, ckpt, run):
        from .ltx2_checks import checkpoint_problems

        return super().check_checkpoint(spec, ckpt, run) or checkpoint_problems(spec, ckpt, run,
                                                                               self._dit(spec, ckpt))

    def build_text_encoder(self, spec, ckpt, run, mesh):
        from . import ltx2_text

        return ltx2_text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import ltx2_text

        return ltx2_text.encode_prompt(encoder, prompts, max_sequence_length=run.sampling.max_sequence_length)

    def vae_latent_shape(self, spec, ckpt, run):
        if not ckpt.has("vae"):
            return None
        from .autoencoder import latent_grid
        from .ltx2_vae import LTX2VAEConfig

        c, s = LTX2VAEConfig.from_config(ckpt.config("vae")), run.sampling
        if s.num_frames is None:  # the duration head predicts it once the prompt is encoded
            return None
        return latent_grid(s.num_frames, s.height, s.width, int(c.temporal_compression_ratio),
                           int(c.spatial_compression_ratio))

    def sampling_passes(self, spec, ckpt, run):
        """``options.two_stage``: the distilled recipe's two stages with the latent upsampler between them."""
        if not run.options.get("two_stage"):
            return None
        from .ltx2_two_stage import passes

        return passes(ckpt, run)

    def predict_num_frames(self, spec, ckpt, run, context):
        """The checkpoint's duration head on the prompt's connector tokens (``LTX2Pipeline`` with ``num_frames``
        omitted): seconds, then the frame count ``predict_num_frames`` snaps them to."""
        if not ckpt.has("duration_head"):
            return None
        from . import ltx2_duration as dh
        from .ltx2_vae import LTX2VAEConfig

        head = dh.load(ckpt.config(dh.COMPONENT), ckpt.tensors(dh.COMPONENT))
        seconds = dh.predict_seconds(head, context["video"][:1], context["audio"][:1])
        o = run.options
        fps = float(o["frame_rate"])
        frames = dh.frames_for_seconds(seconds, fps, int(LTX2VAEConfig.from_config(ckpt.config("vae"))
                                                         .temporal_compression_ratio),
                                       float(o["min_seconds"]), float(o["max_seconds"]))
        return frames, {"seconds": seconds, "duration_s": frames / fps}

    def build_vae(self, spec, ckpt, run):
        from .ltx2_autoencoder import load

        return load(ckpt, run)

    def builtin_checkpoint(self, spec, name):
        return super().builtin_checkpoint(spec, f"ltx2-{name}")  # beside LTX-Video's own tiny-random

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .ltx2_conditioning import prepare

        crf = run.options.get("image_crf")
        if crf is None:  # the model's: LTX-2.5 (Gemma-4 prompt encoder) was trained at 18, earlier ones at 33
            gemma4 = ckpt.config("text_encoder").get("model_type") in ("gemma4_unified", "gemma4")
            crf = ltx2_presets.IMAGE_CRF_25 if gemma4 else ltx2_presets.IMAGE_CRF
        return prepare(run, vae, latent_shape, self._dit(spec, ckpt), image_crf=int(crf))
