"""HunyuanVideo's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, size_problems

from . import presets


def run_problems(spec, run) -> list[str]:
    """Frame count, size, the task's inputs and the prompt options, before any weight loads."""
    s = run.sampling
    problems = []
    problems += frame_count_problems(s.num_frames, 4, "HunyuanVideo", "the VAE compresses time by 4")
    problems += size_problems(s, 16, "HunyuanVideo (VAE factor 8 x patch 2)")
    if "i2v" in spec.tasks and run.image is None:
        problems.append(f"{spec.id} is image-to-video: give the first frame with image=path/to/image.png")
    if "i2v" not in spec.tasks and run.image is not None:
        problems.append(f"{spec.id} is text-to-video: it takes no image (image:); use hunyuanvideo-i2v-13b")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    o = run.options
    problems += presets.template_problems(o.get("prompt_template"), o.get("crop_start"), "i2v" in spec.tasks)
    if o.get("true_cfg_scale") is not None and float(o["true_cfg_scale"]) < 0:
        problems.append(f"options.true_cfg_scale must be >= 0 (1 = off), got {o['true_cfg_scale']}")
    if s.max_sequence_length < 1:
        problems.append(f"sampling.max_sequence_length must be positive, got {s.max_sequence_length}: use 256")
    return problems


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """The DiT config must be a HunyuanVideo 1.0 one and fit the VAE; read from config files only."""
    problems: list[str] = []
    want = "token_replace" if "i2v" in spec.tasks else None
    if dit.image_condition_type != want:
        problems.append(f"transformer/config.json: image_condition_type={dit.image_condition_type!r}; {spec.id} "
                        f"needs {want!r}" + (" (the latent_concat I2V variant is not supported)" if want else ""))
    if ckpt.has("vae"):
        c = ckpt.config("vae").get("latent_channels", 16)
        if dit.in_channels != c:
            problems.append(f"transformer/config.json: in_channels={dit.in_channels} does not match latent_channels="
                            f"{c} of vae/config.json")
    return problems
