"""Kandinsky 6's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core import frame_count_problems, size_problems

from .k6_presets import TEMPORAL

SIZE_MULTIPLE = 16  # check_inputs: the VAE's 8 times the patch's 2
TEXT_LIMIT = 2048  # the text and audio RoPE tables' positions
ROPE_LIMIT = 128  # the video RoPE tables' positions per axis


def run_problems(spec, run) -> list[str]:
    s = run.sampling
    problems = frame_count_problems(s, TEMPORAL, spec.id, "the VAE compresses time by 4")
    problems += size_problems(s, SIZE_MULTIPLE, f"{spec.id} (VAE factor 8, patch 2)")
    frames = (s.num_frames - 1) // TEMPORAL + 1 + (run.image is not None)
    if frames > ROPE_LIMIT:
        problems.append(f"sampling.num_frames={s.num_frames} makes {frames} latent frames (with the image's "
                        f"reference frame); the model's RoPE has {ROPE_LIMIT}: use fewer frames")
    for key in ("height", "width"):
        if getattr(s, key) > ROPE_LIMIT * SIZE_MULTIPLE:
            problems.append(f"sampling.{key}={getattr(s, key)} exceeds the {ROPE_LIMIT} RoPE positions of "
                            f"{SIZE_MULTIPLE} pixels each: use at most {ROPE_LIMIT * SIZE_MULTIPLE}")
    if not 1 <= s.max_sequence_length <= TEXT_LIMIT - 1:
        problems.append(f"sampling.max_sequence_length must be from 1 to {TEXT_LIMIT - 1} for {spec.id} (the text "
                        f"RoPE's positions), got {s.max_sequence_length}")
    if not float(run.options.get("frame_rate", 24.0)) > 0:
        problems.append(f"options.frame_rate must be positive, got {run.options.get('frame_rate')}")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:); give a first frame with image:")
    if run.options.get("expand_prompts"):
        problems.append("options.expand_prompts: the pipeline's prompt expansion generates text with Qwen2.5-VL (and "
                        "its vision tower for an image), which vidax does not run: expand the prompt beforehand and "
                        "give it as prompt:, with options.expand_prompts=false")
    return problems


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_kandinsky.k6_dit.Kandinsky6DiTConfig`; config files only."""
    where = "transformer/config.json"
    problems: list[str] = []
    if run.image is not None:
        if not dit.visual_cond:
            problems.append(f"{where}: visual_cond=false: this checkpoint cannot take an image (image:), which the "
                            "pipeline marks in the condition channels")
        elif dit.visual_token_type_num_embeddings < 2:
            problems.append(f"{where}: visual_token_type_num_embeddings={dit.visual_token_type_num_embeddings}: "
                            "image-to-video needs 2 token types; run it without image:")
    if ckpt.has("vae"):
        c = ckpt.config("vae").get("latent_channels")
        if c is not None and c != dit.in_visual_dim:
            problems.append(f"{where}: in_visual_dim={dit.in_visual_dim} differs from latent_channels={c} of "
                            "vae/config.json: the two components do not belong together")
    problems += grid_problems(ckpt, run, dit, where)
    if run.options.get("sample_audio", True):
        problems += _audio_problems(spec, ckpt, run, dit)
    return problems


def grid_problems(ckpt, run, dit, where: str) -> list[str]:
    """A head's predictions per channel (``dit.n_grid``) against the checkpoint's scheduler: PiFlow's ``n_grid``,
    one for every other sampler (unless ``sampling.scheduler`` names another)."""
    if not ckpt.has("scheduler") or run.sampling.scheduler is not None:
        return []
    sched = ckpt.config("scheduler")
    grid = int(sched.get("n_grid", 10)) if sched.get("_class_name") == "PiflowScheduler" else 1
    if dit.n_grid == grid:
        return []
    return [f"{where}: the head predicts {dit.n_grid} value(s) per channel but scheduler/scheduler_config.json "
            f"({sched.get('_class_name')}) expects {grid}"]


def _audio_problems(spec, ckpt, run, dit) -> list[str]:
    if not (ckpt.has("audio_vae") and ckpt.has("vocoder")):
        return ["sample_audio needs the checkpoint's audio_vae/ and vocoder/ folders: add them, or set "
                "options.sample_audio=false"]
    from vidax_core.audio import mmaudio

    from .k6_conditioning import audio_frames

    vae = mmaudio.MMAudioVAEConfig.from_config(ckpt.config("audio_vae"))
    problems = mmaudio.check_pair(vae, mmaudio.vocoder_config(ckpt.config("vocoder"), vae.sample_rate))
    if vae.latent_channels != dit.in_audio_dim:
        problems.append(f"transformer/config.json: in_audio_dim={dit.in_audio_dim} differs from latent_channels="
                        f"{vae.latent_channels} of audio_vae/config.json")
    length = audio_frames(run.sampling.num_frames, TEMPORAL, float(run.options.get("frame_rate", 24.0)),
                          vae.sample_rate, vae.latent_hop_length)
    if length > TEXT_LIMIT:
        problems.append(f"sampling.num_frames={run.sampling.num_frames} makes {length} audio latent frames; the "
                        f"audio RoPE has {TEXT_LIMIT} positions: use fewer frames or a higher options.frame_rate")
    return problems
