"""The limits every request is held to: settings with defaults that refuse abuse but allow real work."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """``max_queue``: jobs waiting (not counting the running one) before a create answers 429.
    ``max_prompt_chars``: per prompt and negative prompt (a 1 MB prompt is refused by default).
    ``max_steps`` / ``max_frames`` / ``max_pixels`` (height x width): per job, after the model's own checks.
    ``max_body_bytes``: a whole create request, an uploaded image included.
    ``max_jobs_kept``: finished jobs remembered (and their videos kept); the oldest finished ones go first.
    ``max_upload_pixels``: width x height of an uploaded image, read from its header before anything decodes it
    (a 9000x9000 upload decodes to 243 MB; the image is resized to the video's size anyway)."""

    max_queue: int = 64
    max_prompt_chars: int = 20_000
    max_steps: int = 10_000
    max_frames: int = 1_025
    max_pixels: int = 1920 * 1088
    max_body_bytes: int = 32 * 1024 * 1024
    max_jobs_kept: int = 1_000
    max_upload_pixels: int = 4096 * 4096
