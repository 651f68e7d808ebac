"""What a call gives back (:class:`RunResult`) and every file it writes, in one place: the mp4 (with its audio
track), ``output.save_latents`` / ``save_frames`` / ``save_audio``, the step cache's calibration and the metrics
record. Each file is written atomically (:mod:`vidax_core.io.outputs`; a chunked run streams its mp4 window by
window, committed only when the run completes); under ``jax.distributed`` only process 0 writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vidax_core.io import audio, outputs, video
from vidax_core.model_api import Decoded


@dataclass
class RunResult:
    """One call's final latents (the layout ``output.save_latents`` writes), frames, metrics and audio."""

    latents: Any
    frames: np.ndarray | None
    metrics: dict[str, Any] = field(default_factory=dict)
    audio: np.ndarray | None = None
    sample_rate: int | None = None
    session: Any = None  # a causal call kept for a continuation (vidax_core.causal.session)


def write_call_outputs(cfg: Any, final: Any, frames: np.ndarray, decoded: Decoded, metrics: dict,
                       reporter: Any, *, mp4: bool = True) -> None:
    """The outputs ``cfg.output`` asks for, after the call's video is decoded (``mp4=False``: the caller
    streamed the mp4 itself)."""
    from vidax_core.cache.run import write_calibration

    out = cfg.output
    if out.save_latents:
        save_latents(out.save_latents, final)
    if out.save_frames:
        outputs.save_npy(out.save_frames, frames.astype(np.float32))
    if out.save_audio:
        save_audio(out.save_audio, decoded, reporter)
    if out.path and mp4:
        write_video(out.path, frames[0], out.fps, decoded.audio, decoded.sample_rate)
    write_calibration(cfg, metrics)
    if out.metrics:
        outputs.save_json(out.metrics, metrics)


def save_latents(path: str, final: Any) -> None:
    """``output.save_latents``: one .npy, or a .npz with one array per latent stream (one array named ``.npz`` is
    an archive holding ``latents``: a file is what its name says; several streams named ``.npy`` are refused
    when the call is planned)."""
    if isinstance(final, dict) or str(path).lower().endswith(".npz"):
        arrays = final if isinstance(final, dict) else {"latents": final}

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})

        outputs.write_atomic(path, write)
    else:
        outputs.save_npy(path, final)


def write_video(path: str, frames: np.ndarray, fps: int, wave: Any = None, sample_rate: Any = None) -> None:
    """The mp4 of one video (with its audio track when the model makes sound)."""
    video.write_mp4(path, frames, fps)
    if wave is not None:
        audio.mux_audio(path, wave[0], int(sample_rate or 16000))


def save_audio(path: str, decoded: Decoded, reporter: Any) -> None:
    """``output.save_audio``: the first video's waveform as a 16-bit PCM .wav, or every video's as float32
    (B, samples, channels) .npy (exact, for parity checks); a model without sound writes nothing and says so."""
    if decoded.audio is None:
        reporter.log(f"output.save_audio: this model makes no sound, {path} is not written")
        return
    if path.lower().endswith(".wav"):
        outputs.write_atomic(path, lambda tmp: audio.write_wav(tmp, decoded.audio[0], int(decoded.sample_rate)))
    else:
        outputs.save_npy(path, np.asarray(decoded.audio, np.float32))
