"""Helios' run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import latent_channel_problems, size_problems

SPATIAL_MULTIPLE = 16  # the VAE's 8 x the DiT's 2x2 patch (the pipeline's own check)
PATCH = (1, 2, 2)


def history_tokens(sizes: list[int], grid_hw: tuple[int, int]) -> int:
    """Tokens of the history in front of a chunk: the short scale (first frame + 1x) at the chunk's patch, the mid
    and long scales at 2x and 4x coarser patches over their padded latents."""
    h, w = grid_hw
    long, mid, one = sizes
    count = (1 + one) * (h // 2) * (w // 2)
    for frames, m in ((mid, 2), (long, 4)):
        count += -(-frames // m) * -(-h // (2 * m)) * -(-w // (2 * m))
    return count


PYRAMID_PIPELINE = "HeliosPyramidPipeline"
PYRAMID_SCHEDULERS = ("HeliosScheduler", "HeliosDMDScheduler")


def is_pyramid(spec) -> bool:
    """The ids run as HeliosPyramidPipeline (Helios-Mid, Helios-Distilled) take its stage options."""
    return "pyramid_num_inference_steps_list" in (spec.options or {})


def pyramid_problems(spec, run, sizes: list[int], chunk: int) -> list[str]:
    s, o = run.sampling, dict(run.options or {})
    steps = list(o.get("pyramid_num_inference_steps_list") or [])
    if not steps or any(int(v) < 1 for v in steps):
        return [f"options.pyramid_num_inference_steps_list must list at least one stage of at least one step, got "
                f"{steps}: the recipe's is {list(spec.options['pyramid_num_inference_steps_list'].default)}"]
    problems = []
    if int(s.num_steps) != sum(steps):
        problems.append(f"sampling.num_steps={s.num_steps} but the pyramid stages run {steps} steps: set "
                        f"sampling.num_steps={sum(steps)} (or change options.pyramid_num_inference_steps_list)")
    multiple = SPATIAL_MULTIPLE * 2 ** (len(steps) - 1)
    for name, v in (("height", s.height), ("width", s.width)):
        if v % multiple:
            problems.append(f"sampling.{name}={v}: the {len(steps)} pyramid stages halve the latents "
                            f"{len(steps) - 1} times, so it must be a multiple of {multiple} (e.g. "
                            f"{max(multiple, v // multiple * multiple)})")
    if s.scheduler is not None:
        problems.append(f"sampling.scheduler: {spec.id} steps each pyramid stage with its checkpoint's scheduler "
                        "(HeliosScheduler or HeliosDMDScheduler with stages): remove sampling.scheduler")
    sp = int(run.parallel.sp or 1)
    if not problems and sp > 1:
        grid = (s.height // 8, s.width // 8)
        for stage in range(len(steps)):
            m = 2 ** (len(steps) - 1 - stage)
            total = history_tokens(sizes, grid) + chunk * (grid[0] // m // 2) * (grid[1] // m // 2)
            if total % sp:
                problems.append(f"parallel.sp={sp} must divide the {total} tokens of a chunk's stage {stage + 1} "
                                "and its history: change parallel.sp, the size or options.history_sizes")
                break
    return problems


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, dict(run.options or {})
    problems = size_problems(s, SPATIAL_MULTIPLE, spec.id)
    sizes, chunk = list(o.get("history_sizes", [16, 2, 1])), o.get("num_latent_frames_per_chunk", 9)
    if len(sizes) != 3 or any(v < 1 for v in sizes):
        problems.append(f"options.history_sizes must be three positive latent frame counts (long, mid, short), got "
                        f"{sizes}: the recipe's is [16, 2, 1]")
    if chunk < 1:
        problems.append(f"options.num_latent_frames_per_chunk must be at least 1, got {chunk}: the recipe's is 9")
    if not o.get("keep_first_frame", True):
        problems.append("options.keep_first_frame=false: diffusers' HeliosPipeline cannot run it (its history "
                        "split no longer matches the history it keeps): keep it true")
    if run.image is not None or getattr(run, "video", None) is not None:
        problems.append(f"{spec.id} runs text-to-video here: remove image / video")
    if not problems and is_pyramid(spec):
        return pyramid_problems(spec, run, sizes, chunk)
    sp = int(run.parallel.sp or 1)
    if not problems and sp > 1:
        grid = (s.height // 8, s.width // 8)
        total = history_tokens(sizes, grid) + chunk * (grid[0] // 2) * (grid[1] // 2)
        if total % sp:
            problems.append(f"parallel.sp={sp} must divide the {total} tokens of a chunk and its history: change "
                            "parallel.sp, the size or options.history_sizes")
    return problems


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    problems = []
    if tuple(dit.patch_size) != PATCH:
        problems.append(f"transformer/config.json: patch_size={list(dit.patch_size)}: the Helios pipeline's history "
                        f"layout assumes {list(PATCH)}")
    if not dit.has_multi_term_memory_patch:
        problems.append("transformer/config.json: has_multi_term_memory_patch=false: HeliosPipeline feeds the "
                        "multi-scale history, which needs the memory patches")
    problems += pipeline_problems(spec, ckpt, run)
    problems += latent_channel_problems(ckpt, dit.out_channels)
    return problems


def pipeline_problems(spec, ckpt, run) -> list[str]:
    """The checkpoint's pipeline and scheduler must be the id's: HeliosPipeline with a one-stage scheduler, or
    HeliosPyramidPipeline with a scheduler of as many stages as the run's pyramid."""
    pipeline = ckpt.model_index.get("_class_name")
    sched = ckpt.config("scheduler") if ckpt.has("scheduler") else {}
    cls, stages = sched.get("_class_name"), sched.get("stages", 3)
    if not is_pyramid(spec):
        if pipeline == PYRAMID_PIPELINE or cls == "HeliosDMDScheduler" or (cls == "HeliosScheduler" and stages != 1):
            return [f"the checkpoint is a HeliosPyramidPipeline ({cls}, stages={stages}): run it as helios-mid or "
                    f"helios-distilled, not {spec.id}"]
        return []
    if pipeline not in (None, PYRAMID_PIPELINE):
        return [f"model_index.json: {pipeline} is not the HeliosPyramidPipeline {spec.id} runs: run it as "
                "helios-base"]
    steps = list(dict(run.options or {}).get("pyramid_num_inference_steps_list") or [])
    if cls not in PYRAMID_SCHEDULERS:
        return [f"scheduler/scheduler_config.json: {cls} is not a Helios pyramid scheduler "
                f"({', '.join(PYRAMID_SCHEDULERS)})"]
    if steps and stages != len(steps):
        return [f"options.pyramid_num_inference_steps_list has {len(steps)} stages but the checkpoint's {cls} has "
                f"stages={stages}: give {stages} step counts"]
    return []
