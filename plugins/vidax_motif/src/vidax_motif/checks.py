"""Motif-Video's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core import frame_count_problems, size_problems

from .presets import SPATIAL, TEMPORAL

WHERE = "transformer/config.json"


def run_problems(spec, run) -> list[str]:
    s = run.sampling
    problems = frame_count_problems(s, TEMPORAL, spec.id, "the Wan VAE compresses time by 4")
    problems += size_problems(s, SPATIAL, f"{spec.id} (the VAE's factor)")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:); give a first frame with image: for "
                        "image-to-video")
    return problems


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_motif.dit.MotifDiTConfig`; config files only."""
    from vidax_core.errors import UserError
    from vidax_core.guiders import guider_problems

    problems: list[str] = []
    if ckpt.has("vae"):
        factor = ckpt.config("vae").get("scale_factor_spatial", SPATIAL)
        if isinstance(factor, int) and factor > SPATIAL:  # a Wan2.2-style VAE: check_inputs asks for its factor
            problems += size_problems(run.sampling, factor, f"{spec.id} (vae/config.json's scale_factor_spatial)")
        z = ckpt.config("vae").get("z_dim", 16)
        if isinstance(z, int) and dit.in_channels != 2 * z + 1:
            problems.append(f"{WHERE}: in_channels={dit.in_channels}, but the pipeline feeds 2 x z_dim + 1 = "
                            f"{2 * z + 1} channels (latents, condition latent, mask; z_dim={z} of vae/config.json)")
        if isinstance(z, int) and dit.out_channels != z:
            problems.append(f"{WHERE}: out_channels={dit.out_channels} differs from z_dim={z} of vae/config.json: "
                            "the two components do not belong together")
    if ckpt.has("text_encoder"):
        from vidax_core.encoders.t5gemma2 import text_config

        try:
            width = text_config(ckpt.config("text_encoder")).hidden_size
        except UserError as exc:
            problems.append(f"text_encoder/config.json: {exc}")
        else:
            if width != dit.text_embed_dim:
                problems.append(f"{WHERE}: text_embed_dim={dit.text_embed_dim} does not match hidden_size={width} "
                                "of text_encoder/config.json")
    if run.image is not None and (run.sampling.num_frames - 1) // TEMPORAL >= 1:
        problems += _image_problems(spec, ckpt, dit)
    return problems + guider_problems(ckpt)


def _image_problems(spec, ckpt, dit) -> list[str]:
    if dit.image_embed_dim is None:
        return [f"{WHERE}: image_embed_dim is null, so this checkpoint's DiT takes no image: run {spec.id} "
                "without image: (text-to-video)"]
    if not ckpt.has("feature_extractor"):
        return ["the checkpoint has no feature_extractor/ (SigLIP image processor), which image-to-video needs"]
    vision = ckpt.config("text_encoder").get("vision_config") if ckpt.has("text_encoder") else None
    width = vision.get("hidden_size") if isinstance(vision, dict) else None
    if width is None:
        return ["text_encoder/config.json has no vision_config (SigLIP), which image-to-video needs"]
    if width != dit.image_embed_dim:
        return [f"{WHERE}: image_embed_dim={dit.image_embed_dim} does not match the SigLIP hidden_size={width} of "
                "text_encoder/config.json"]
    return []
