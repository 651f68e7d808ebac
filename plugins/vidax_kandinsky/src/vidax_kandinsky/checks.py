"""Kandinsky 5's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core import frame_count_problems, size_problems

from .presets import I2V_MIN_FRAMES, MAX_SEQUENCE_LIMIT, SIZE_MULTIPLE, TEMPORAL

ROPE_LIMIT = 128  # Kandinsky5RoPE3D's tables: 128 positions per axis (latent frames, patch rows, patch columns)
NABLA_MULTIPLE = 128  # pixels per NABLA block side: 8 patches x 2 latents x 8 pixels


def run_problems(spec, run) -> list[str]:
    s = run.sampling
    i2v = "i2v" in spec.tasks
    problems = frame_count_problems(s, TEMPORAL, spec.id, "the VAE compresses time by 4")
    problems += size_problems(s, SIZE_MULTIPLE, f"{spec.id} (VAE factor 8, patch 2)")
    frames = (s.num_frames - 1) // TEMPORAL + 1
    if frames > ROPE_LIMIT:
        problems.append(f"sampling.num_frames={s.num_frames} makes {frames} latent frames; the model's RoPE has "
                        f"{ROPE_LIMIT} positions: use at most {TEMPORAL * (ROPE_LIMIT - 1) + 1}")
    for key in ("height", "width"):
        if getattr(s, key) > ROPE_LIMIT * SIZE_MULTIPLE:
            problems.append(f"sampling.{key}={getattr(s, key)} exceeds the {ROPE_LIMIT} RoPE positions of "
                            f"{SIZE_MULTIPLE} pixels each: use at most {ROPE_LIMIT * SIZE_MULTIPLE}")
    if not 1 <= s.max_sequence_length <= MAX_SEQUENCE_LIMIT:
        problems.append(f"sampling.max_sequence_length must be from 1 to {MAX_SEQUENCE_LIMIT} for {spec.id}, got "
                        f"{s.max_sequence_length}")
    if i2v and run.image is None:
        problems.append(f"{spec.id} is image-to-video: give the first frame with image=path/to/image.png")
    if i2v and s.num_frames < I2V_MIN_FRAMES:
        problems.append(f"{spec.id} needs sampling.num_frames >= {I2V_MIN_FRAMES}: the pipeline renormalises latent "
                        f"frames 0-3 against frames 4 and later (got {s.num_frames})")
    if not i2v and run.image is not None:
        problems.append(f"{spec.id} is text-to-video: it takes no image (image:); use kandinsky5-i2v-lite")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    return problems


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_kandinsky.dit.KandinskyDiTConfig`; config files only."""
    where = "transformer/config.json"
    problems: list[str] = []
    if "i2v" in spec.tasks and not dit.visual_cond:
        problems.append(f"{where}: visual_cond=false; {spec.id} marks the image frame in the condition channels, "
                        "which needs a visual_cond checkpoint")
    if ckpt.has("vae"):
        c = ckpt.config("vae").get("latent_channels")
        if c is not None and c != dit.in_visual_dim:
            problems.append(f"{where}: in_visual_dim={dit.in_visual_dim} differs from latent_channels={c} of "
                            "vae/config.json: the two components do not belong together")
    for folder, field, keys in (("text_encoder", "in_text_dim", ("text_config", "hidden_size")),
                                ("text_encoder_2", "in_text_dim2", ("hidden_size",))):
        if not ckpt.has(folder):
            continue
        config = ckpt.config(folder)
        width = (config.get(keys[0]) or {}).get(keys[1]) if len(keys) == 2 else None
        width = width or config.get("hidden_size")
        if width is not None and width != getattr(dit, field):
            problems.append(f"{where}: {field}={getattr(dit, field)} does not match hidden_size={width} of "
                            f"{folder}/config.json")
    if dit.attention_type == "nabla":
        for key in ("height", "width"):  # NABLA's blocks: 8 x 8 patches of 2 x 2 latents of 8 pixels
            v = getattr(run.sampling, key)
            if v % NABLA_MULTIPLE:
                problems.append(f"{where}: attention_type='nabla' cuts the video into 8x8-patch blocks: "
                                f"sampling.{key} must be a multiple of {NABLA_MULTIPLE}, got {v}: use "
                                f"{max(NABLA_MULTIPLE, v // NABLA_MULTIPLE * NABLA_MULTIPLE)}")
    return problems
