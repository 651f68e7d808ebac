"""AnyFlow's run checks: one-line problems found before any weight loads."""

from __future__ import annotations

from typing import Any

from vidax_core.run_checks import frame_count_problems, latent_channel_problems, size_problems

from .presets import FAR_IDS

TEMPORAL_FACTOR = 4  # the Wan VAE compresses time by 4
SPATIAL_MULTIPLE = 16  # the pipelines' check: the VAE's 8 x the DiT's 2x2 patch


def latent_frames(num_frames: int) -> int:
    return (int(num_frames) - 1) // TEMPORAL_FACTOR + 1


def run_problems(spec: Any, run: Any) -> list[str]:
    s = run.sampling
    problems = frame_count_problems(s.num_frames, TEMPORAL_FACTOR, "AnyFlow", "the VAE compresses time by 4")
    problems += size_problems(s, SPATIAL_MULTIPLE, spec.id)
    if run.image is not None and run.video is not None:
        problems.append("give image (image-to-video) or video (a clip to continue), not both: AnyFlow conditions on "
                        "one set of frames")
    o = dict(run.options or {})
    if spec.id in FAR_IDS:
        part = o.get("chunk_partition")
        if part is not None and not problems:
            want = latent_frames(s.num_frames)
            if not part or min(part) < 1 or sum(part) != want:
                problems.append(f"options.chunk_partition={list(part)} must be positive latent frame counts adding "
                                f"up to the video's {want} latent frames ((num_frames - 1) / 4 + 1)")
        window = o.get("cache_window")
        if window is not None and window < 1:
            problems.append(f"options.cache_window={window} must be at least 1 latent frame (null: the model's "
                            "trained length)")
    return problems


def checkpoint_problems(spec: Any, ckpt: Any, run: Any, dit: Any) -> list[str]:
    """A bidirectional transformer for a FAR id or the reverse; a FAR run its checkpoint cannot make."""
    from .dit import is_far

    problems = []
    far = is_far(ckpt.config("transformer"))
    want = spec.id in FAR_IDS
    if far is None:
        problems.append(f"transformer/config.json: _class_name {ckpt.config('transformer').get('_class_name')!r} is "
                        "not an AnyFlow transformer (AnyFlowTransformer3DModel or AnyFlowFARTransformer3DModel)")
    elif far != want:
        kind = "the causal AnyFlow-FAR" if far else "the bidirectional AnyFlow"
        problems.append(f"transformer/config.json holds {kind} transformer, but {spec.id} is "
                        f"{'FAR' if want else 'bidirectional'}: use model.id="
                        f"{'anyflow-far-wan2.1-1.3b' if far else 'anyflow-wan2.1-t2v-1.3b'} (or the 14B one)")
    problems += latent_channel_problems(ckpt, dit.out_channels)
    if dit.in_channels != dit.out_channels:
        problems.append(f"transformer/config.json: in_channels={dit.in_channels} differs from out_channels="
                        f"{dit.out_channels}: AnyFlow feeds the DiT the latents alone")
    if want and far and not problems and run is not None:
        problems += far_problems(run, dit, ckpt)
    return problems


def far_problems(run: Any, dit: Any, ckpt: Any) -> list[str]:
    """The FAR run's chunks against its video, conditioning and RoPE table."""
    from vidax_core.vae.wan_video import latent_grid

    from .conditioning import given_latent_frames
    from .far import geometry_for, partition_for

    s = run.sampling
    total = latent_frames(s.num_frames)
    if total > dit.rope_max_seq_len:
        return [f"sampling.num_frames={s.num_frames} is {total} latent frames, past the model's RoPE table "
                f"(rope_max_seq_len={dit.rope_max_seq_len}): use at most {(dit.rope_max_seq_len - 1) * 4 + 1}"]
    part = partition_for(run, dit)
    try:
        geometry_for(run, dit, latent_grid(ckpt.config("vae"), 1, s.height, s.width)[1:])
    except ValueError as exc:
        return [f"options: {exc}"]
    given = given_latent_frames(run)
    if given >= total or (given and sum(part[:-1]) < given):
        return [f"the conditioning covers {given} latent frames, which leaves no chunk of the {total}-frame video to "
                "make: raise sampling.num_frames"]
    return []
