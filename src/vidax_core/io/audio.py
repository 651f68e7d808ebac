"""Audio tracks: write float samples as 16-bit PCM WAV, and mux a WAV into an mp4 (models that generate sound)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import warnings
import wave

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.ffmpeg import ffmpeg_module
from vidax_core.io.outputs import write_atomic


def write_wav(path: str, audio: np.ndarray, sample_rate: int) -> None:
    """``audio`` (samples, channels) or (samples,) float in [-1, 1] -> 16-bit PCM WAV."""
    a = np.asarray(audio, np.float32)
    if a.ndim == 1:
        a = a[:, None]
    pcm = (np.clip(np.nan_to_num(a), -1.0, 1.0) * 32767.0).round().astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(pcm.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())


def mux_audio(video_path: str, audio: np.ndarray, sample_rate: int) -> None:
    """Add ``audio`` as an AAC track to the mp4 at ``video_path`` (video stream copied, file replaced atomically)."""
    imageio_ffmpeg = ffmpeg_module()

    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "audio.wav")
        write_wav(wav, audio, sample_rate)

        def write(out: str) -> None:
            cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-i", video_path, "-i", wav,
                   "-map", "0:v:0", "-map", "1:a:0", "-c:v", "copy", "-c:a", "aac", "-f", "mp4", out]
            with warnings.catch_warnings():  # exec follows the fork at once: JAX's fork warning does not apply
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise UserError(f"could not add the audio track to {video_path}: "
                                f"{proc.stderr.strip().splitlines()[-1:]}")

        write_atomic(video_path, write)


def audio_stream_count(path: str) -> int:
    """Number of audio streams in a media file (tests)."""
    imageio_ffmpeg = ffmpeg_module()

    proc = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", path], capture_output=True, text=True)
    return sum(1 for line in proc.stderr.splitlines() if "Stream #" in line and "Audio:" in line)
