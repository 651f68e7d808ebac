"""Cosmos3's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.errors import UserError
from vidax_core.run_checks import frame_count_problems, size_problems


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, run.options
    problems = frame_count_problems(s.num_frames, 4, spec.id, "the VAE compresses time by 4")
    problems += size_problems(s, 16, f"{spec.id} (the Wan2.2 VAE's factor 16)")
    if run.image is not None and run.video is not None:
        problems.append(f"{spec.id} conditions on an image (image-to-video) or a video (video-to-video), not both: "
                        "set only one of image: and video:")
    elif run.video is not None:
        problems += video_problems(s.num_frames, o)
    if run.image is not None and s.num_frames == 1:
        problems.append(f"{spec.id} image-to-video needs sampling.num_frames > 1 (the pipeline ignores the image "
                        "of a 1-frame run): use 5 or more, or remove image:")
    fps = o.get("fps")
    if fps is not None and not float(fps) > 0:
        problems.append(f"options.fps must be positive, got {fps}: use 24 (the pipeline's)")
    if s.max_sequence_length < 3:
        problems.append(f"sampling.max_sequence_length={s.max_sequence_length} cannot hold a prompt and the two "
                        "tokens Cosmos3 appends: use 4096 (no cap, as the reference)")
    return problems


def video_problems(num_frames: int, options) -> list[str]:
    """The pipeline's video-to-video checks (``check_inputs``), each one line."""
    problem = _video_problem(num_frames, options)
    return [problem] if problem else []


def _video_problem(num_frames: int, options) -> str | None:
    if num_frames == 1:
        return ("video-to-video needs sampling.num_frames > 1 (a 1-frame run is text-to-image): use 5 or more, "
                "or remove video:")
    indexes = options.get("condition_frame_indexes_vision", [0, 1])
    if not isinstance(indexes, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indexes):
        return (f"options.condition_frame_indexes_vision must be a list of non-negative latent frame indexes, "
                f"e.g. [0, 1]; got {indexes!r}")
    if not indexes:
        return "options.condition_frame_indexes_vision must hold at least one latent frame index, e.g. [0, 1]"
    latent_frames = (num_frames - 1) // 4 + 1
    if max(indexes) >= latent_frames:
        return (f"options.condition_frame_indexes_vision {list(indexes)} has an index outside the latent timeline: "
                f"sampling.num_frames={num_frames} gives {latent_frames} latent frames (0..{latent_frames - 1}); "
                f"use smaller indexes or at least {4 * max(indexes) + 1} frames")
    keep = options.get("condition_video_keep", "first")
    if keep not in ("first", "last"):
        return f"options.condition_video_keep must be first or last, got {keep!r}"
    return None


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_cosmos.cosmos3_dit.Cosmos3DiTConfig`; config files only."""
    from .cosmos3_fp8 import fp8_signs, BF16_REVISION
    from .cosmos3_parallel import check_config

    where = "transformer/config.json"
    problems: list[str] = []
    if ckpt.has("text_tokenizer"):
        from .cosmos3_prompt import check_template

        problems += check_template(ckpt.path("text_tokenizer"))
    else:
        problems.append(f"{ckpt.source} has no text_tokenizer/ folder, which {spec.id} reads the prompt with")
    folder = ckpt.path("transformer") if ckpt.has("transformer") else None
    signs = fp8_signs({}, ckpt.config("transformer"), folder)
    if signs:
        problems.append(f"{where}: ModelOpt FP8 transformer weights ({'; '.join(signs)}), which vidax does not load: "
                        f"use the bf16 weights, revision {BF16_REVISION!r} of {spec.hub_repo or 'the repo'} "
                        f"(model.revision={BF16_REVISION})")
    if ckpt.has("vae"):
        vae = ckpt.config("vae")
        z = vae.get("z_dim")
        if z is not None and int(z) != dit.latent_channel:
            problems.append(f"{where}: latent_channel={dit.latent_channel} does not match z_dim={z} of "
                            "vae/config.json")
        tcf = vae.get("scale_factor_temporal")
        if tcf is not None and int(tcf) != dit.temporal_compression_factor:
            problems.append(f"{where}: temporal_compression_factor={dit.temporal_compression_factor} does not match "
                            f"scale_factor_temporal={tcf} of vae/config.json")
    try:
        check_config(dit, tp=int(run.parallel.tp), sp=int(run.parallel.sp))
    except UserError as exc:
        problems.append(str(exc))
    return problems

