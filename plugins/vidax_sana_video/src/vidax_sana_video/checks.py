"""SANA-Video's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from typing import Any

from vidax_core import frame_count_problems, size_problems

from .presets import BINS_BY_SAMPLE_SIZE, SIZE_MULTIPLE, TEMPORAL

SUPPORTED_VAE = "AutoencoderKLWan"
OTHER_VAES = {
    "AutoencoderKLLTX2Video": "the LTX-2 video VAE (SANA-Video 720p), which vidax-sana-video does not build yet",
    "AutoencoderDC": "a DC-AE video autoencoder, which vidax-sana-video does not build",
}


def run_problems(spec, run) -> list[str]:
    s, o = run.sampling, dict(run.options or {})
    problems = frame_count_problems(s, TEMPORAL, spec.id, "the Wan VAE compresses time by 4")
    if not o.get("use_resolution_binning", True):  # with binning the pipelines check the bin (checkpoint_problems)
        problems += size_problems(s, SIZE_MULTIPLE, f"{spec.id} (the pipelines' check)")
    if o.get("clean_caption"):
        problems.append("options.clean_caption=true: the pipelines' caption cleaning needs BeautifulSoup and ftfy, "
                        "which vidax does not use: clean the prompt yourself and keep options.clean_caption=false")
    if not 1 <= int(s.max_sequence_length or 0):
        problems.append(f"sampling.max_sequence_length must be at least 1 for {spec.id}, got "
                        f"{s.max_sequence_length}")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:): give an image (image:) or nothing")
    return problems


def resolution_bins(dit: Any):
    """The :class:`vidax_core.binning.ResolutionBins` the pipelines pick by the transformer's ``sample_size``, or
    None when it has none."""
    from vidax_core.binning import ResolutionBins

    found = BINS_BY_SAMPLE_SIZE.get(int(dit.sample_size))
    return None if found is None else ResolutionBins.of(found[1], name=found[0])


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """``dit`` is the parsed :class:`vidax_sana_video.dit.SanaVideoDiTConfig`; config files only."""
    where = "transformer/config.json"
    problems: list[str] = []
    if ckpt.has("vae"):
        vae = ckpt.config("vae")
        cls = vae.get("_class_name") or (ckpt.model_index.get("vae") or [None, None])[-1]
        if cls in OTHER_VAES:
            problems.append(f"vae/config.json: {cls} is {OTHER_VAES[cls]}: use a checkpoint with the Wan VAE "
                            "(AutoencoderKLWan)")
        elif cls not in (None, SUPPORTED_VAE):
            problems.append(f"vae/config.json: {cls} is not a VAE the SANA-Video pipelines decode with: expected "
                            f"{SUPPORTED_VAE}")
        elif vae.get("z_dim") is not None and vae["z_dim"] != dit.in_channels:
            problems.append(f"{where}: in_channels={dit.in_channels} differs from z_dim={vae['z_dim']} of "
                            "vae/config.json: the two components do not belong together")
    if ckpt.has("text_encoder"):
        width = ckpt.config("text_encoder").get("hidden_size")
        if width is not None and width != dit.caption_channels:
            problems.append(f"{where}: caption_channels={dit.caption_channels} does not match hidden_size={width} "
                            "of text_encoder/config.json")
    if dict(run.options or {}).get("use_resolution_binning", True):
        bins = resolution_bins(dit)
        s = run.sampling
        if bins is None:
            problems.append(f"{where}: sample_size={dit.sample_size} has no resolution bins (the pipelines know "
                            f"{', '.join(f'{k}: {v[0]}' for k, v in BINS_BY_SAMPLE_SIZE.items())}): set "
                            "options.use_resolution_binning=false")
        else:
            h, w = bins.closest(s.height, s.width)
            if h % SIZE_MULTIPLE or w % SIZE_MULTIPLE:
                problems.append(f"{s.width}x{s.height} falls in the {bins.name} bin {w}x{h}, which the pipelines "
                                f"refuse (height and width must be multiples of {SIZE_MULTIPLE}): ask for another "
                                "aspect ratio, or set options.use_resolution_binning=false with sizes that are "
                                f"multiples of {SIZE_MULTIPLE}")
    return problems
