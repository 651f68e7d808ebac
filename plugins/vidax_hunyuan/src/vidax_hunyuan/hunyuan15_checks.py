"""HunyuanVideo-1.5's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, run.options
    i2v = "i2v" in spec.tasks
    problems = frame_count_problems(s.num_frames, 4, spec.id, "the VAE compresses time by 4")
    problems += size_problems(s, 16, f"{spec.id} (VAE factor 16, patch 1)")
    if i2v and run.image is None:
        problems.append(f"{spec.id} is image-to-video: give the first frame with image=path/to/image.png")
    if not i2v and run.image is not None:
        problems.append(f"{spec.id} is text-to-video: it takes no image (image:); use "
                        f"{spec.id.replace('-t2v-', '-i2v-')}")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    n = o.get("tokenizer_2_max_length")
    if n is not None and int(n) < 1:
        problems.append(f"options.tokenizer_2_max_length must be positive, got {n}: use 256 (the pipeline's)")
    return problems


def image_size_problems(spec, run, target: int) -> list[str]:
    """Image-to-video: the run's size must be the one the pipeline derives from the image and ``target_size``."""
    from vidax_core.errors import UserError
    from vidax_core.io.image import load_image

    from .hunyuan15_image import video_size

    try:
        image = load_image(run.image)
    except UserError as exc:
        return [str(exc)]
    h, w = video_size(image, target)
    s = run.sampling
    if (s.height, s.width) != (h, w):
        return [f"{spec.id} derives the video size from the image ({image.width}x{image.height}) and the model's "
                f"target size {target}, as the pipeline does: use sampling.height={h} sampling.width={w} "
                f"(got {s.height}x{s.width} as height x width)"]
    return []


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_hunyuan.dit15.HunyuanDiT15Config`; config files (and the run's image
    header) only."""
    from .hunyuan15_guidance import guider_problems

    where = "transformer/config.json"
    problems: list[str] = []
    want_meanflow = spec.id.endswith("-step-distilled")
    if dit.use_meanflow != want_meanflow:
        problems.append(f"{where}: use_meanflow={dit.use_meanflow}; {spec.id} needs {want_meanflow}"
                        + (" (the step-distilled checkpoint has its own id: hunyuanvideo-1.5-i2v-480p-step-distilled)"
                           if dit.use_meanflow else ""))
    task = "i2v" if "i2v" in spec.tasks else "t2v"
    if dit.task_type != task:
        problems.append(f"{where}: task_type={dit.task_type!r} is a {dit.task_type} checkpoint; {spec.id} is {task}: "
                        f"use {spec.id.replace(f'-{task}-', f'-{dit.task_type}-')}")
    if ckpt.has("vae"):
        c = int(ckpt.config("vae").get("latent_channels", 32))
        if dit.out_channels != c or dit.in_channels != 2 * c + 1:
            problems.append(f"{where}: in_channels={dit.in_channels}, out_channels={dit.out_channels} do not fit "
                            f"latent_channels={c} of vae/config.json (need {2 * c + 1} and {c})")
    if ckpt.has("text_encoder_2"):
        d = ckpt.config("text_encoder_2").get("d_model")
        if d is not None and int(d) != dit.text_embed_2_dim:
            problems.append(f"{where}: text_embed_2_dim={dit.text_embed_2_dim} does not match d_model={d} of "
                            "text_encoder_2/config.json")
    if ckpt.has("tokenizer"):  # (missing folders are named by the loader; a config-only dry run needs none)
        from .hunyuan15_text import check_template

        problems += check_template(ckpt.path("tokenizer"))
    if "i2v" in spec.tasks:
        for folder in ("image_encoder", "feature_extractor"):
            if not ckpt.has(folder):
                problems.append(f"{ckpt.source} has no {folder}/ folder, which {spec.id} encodes the image with")
        if run.image is not None:
            problems += image_size_problems(spec, run, dit.target_size)
    problems += guider_problems(ckpt)
    return problems
