"""A create request (``POST /v1/videos``): its fields read from JSON or form data, checked, turned into a call.

The fields are the OpenAI videos API's (``prompt``, ``model``, ``seconds``, ``size``, ``input_reference``) plus
vidax's sampling names. Form data carries every value as text, JSON carries typed values; both end in the same
:class:`VideoRequest`. :func:`plan` then has the pipe itself plan the call (``pipe.prepare``), so a request is
refused with the same words ``vidax run`` would print, before it is queued; the worker runs that very plan.
"""

from __future__ import annotations

import difflib
import io
import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from vidax_core.config import scope
from vidax_core.errors import UserError
from vidax_core.serve import multipart
from vidax_core.serve.limits import Limits

# field -> kind; "int"/"float"/"str" are call keywords (the YAML's sampling.* and top-level names)
FIELDS: dict[str, str] = {
    "prompt": "str", "negative_prompt": "str", "model": "str", "size": "str", "seconds": "seconds",
    "input_reference": "file", "seed": "int", "num_steps": "int", "num_frames": "int", "height": "int",
    "width": "int", "guidance_scale": "float",
}
# the request fields handed to the pipe as they are: those that are call arguments (prompt is checked apart)
CALL_KEYS = tuple(k for k in FIELDS if k in scope.CALL_ARGUMENTS and k != "prompt")
MAX_SEED = 2**63 - 1
_SIZE = re.compile(r"^\s*(\d{1,6})\s*[xX]\s*(\d{1,6})\s*$")
_IMAGE_FORMATS = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "BMP": "bmp", "GIF": "gif"}
_NAMES = [{"WEBP": "WebP"}.get(k, k) for k in _IMAGE_FORMATS]
_FORMAT_NAMES = f"a {', '.join(_NAMES[:-1])} or {_NAMES[-1]} file, or an mp4 / webm clip"


@dataclass(frozen=True)
class Upload:
    """An uploaded reference (an image, checked to decode, or a clip for a video-conditioned model: read when the
    call is planned); ``ext`` and ``kind`` come from its content, never from its name."""

    data: bytes
    ext: str
    kind: str = "image"  # image | video


@dataclass
class VideoRequest:
    """The fields of one create request, typed; absent fields are absent from ``values``."""

    values: dict[str, Any] = field(default_factory=dict)
    image: Upload | None = None


@dataclass(frozen=True)
class Plan:
    """What a valid request will run: the call's keywords, the pipe's plan of it (``call``: what the worker runs)
    and what the video object reports."""

    prompt: str
    kwargs: dict[str, Any]
    size: str
    seconds: str
    num_frames: int
    num_steps: int
    fps: int
    call: Any = None

    def finished(self) -> "Plan":
        """What a finished job's record keeps: the reported fields, not the planned call or its keywords."""
        return replace(self, kwargs={}, call=None)


def from_json(body: bytes, limits: Limits) -> VideoRequest:
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise UserError("the request body is not UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"malformed JSON body: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise UserError("malformed JSON body: nested too deeply") from None
    if not isinstance(data, dict):
        raise UserError(f"the JSON body must be an object of fields, got {type(data).__name__}")
    req = VideoRequest()
    for name, value in data.items():
        kind = _kind(name)
        if value is None:
            continue  # an explicit null means "the default", as the OpenAI SDK's omitted fields do
        if kind == "file":
            raise UserError("input_reference must be an image file uploaded as multipart/form-data "
                            "(image_url and file_id references are not supported)")
        req.values[name] = _typed_json(name, kind, value, limits)
    return req


def from_form(body: bytes, content_type: str, limits: Limits) -> VideoRequest:
    """A multipart/form-data body (what the OpenAI SDK sends)."""
    return _from_parts(multipart.parse(body, content_type), limits)


def from_urlencoded(body: bytes, limits: Limits) -> VideoRequest:
    """An application/x-www-form-urlencoded body (a plain HTML form)."""
    from urllib.parse import parse_qsl

    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True, max_num_fields=50)
    except UnicodeDecodeError:
        raise UserError("the form body is not UTF-8") from None
    except ValueError as exc:
        raise UserError(f"malformed form body: {exc}") from None
    return _from_parts([multipart.Part(k, v.encode("utf-8")) for k, v in pairs], limits)


def _from_parts(parts: list[multipart.Part], limits: Limits) -> VideoRequest:
    req = VideoRequest()
    for part in parts:
        base = part.name.split("[", 1)[0]  # the SDK sends a reference object as input_reference[image_url]
        kind = _kind(base if base == "input_reference" else part.name)
        if part.name in req.values or (kind == "file" and req.image is not None):
            raise UserError(f"field {part.name!r} is given twice")
        if kind == "file":
            if part.filename is None:
                raise UserError("input_reference must be an image file upload (image_url and file_id "
                                "references are not supported)")
            req.image = check_upload(part.data, limits.max_upload_pixels)
            continue
        if part.filename is not None:
            raise UserError(f"field {part.name!r} must be a value, not a file upload")
        req.values[part.name] = _typed_text(part.name, kind, part.text(), limits)
    return req


def video_format(data: bytes) -> str | None:
    """The container of an uploaded clip from its first bytes (mp4 / mov / webm / avi), None for anything else."""
    if data[4:8] == b"ftyp":
        return "mov" if data[8:10] == b"qt" else "mp4"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    if data[:4] == b"RIFF" and data[8:12] == b"AVI ":
        return "avi"
    return None


def check_upload(data: bytes, max_pixels: int | None = None) -> Upload:
    """An uploaded ``input_reference``: a clip (by its container's signature) or an image (:func:`check_image`,
    no larger than ``max_pixels``)."""
    container = video_format(data)
    return Upload(data, container, "video") if container else check_image(data, max_pixels)


def check_image(data: bytes, max_pixels: int | None = None) -> Upload:
    """An uploaded image: decodable by PIL, in a format vidax reads, no larger than ``max_pixels`` by its header
    (checked before anything decodes it); a one-line UserError otherwise."""
    from PIL import Image

    if not data:
        raise UserError("input_reference is an empty file")
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt, (width, height) = img.format, img.size
            if max_pixels is not None and width * height > max_pixels:
                raise UserError(f"input_reference is {width}x{height} ({width * height} pixels), more than this "
                                f"server's limit of {max_pixels} (--max-upload-pixels): send a smaller image (it is "
                                "resized to the video's size)")
            img.verify()
    except UserError:
        raise
    except Exception:  # PIL raises many types for a broken file; all mean the same to the client
        raise UserError(f"input_reference is not a readable image (send {_FORMAT_NAMES})") from None
    if fmt not in _IMAGE_FORMATS:
        raise UserError(f"input_reference is a {fmt} image; send {_FORMAT_NAMES}")
    return Upload(data, _IMAGE_FORMATS[fmt])


def plan(req: VideoRequest, pipe: Any, limits: Limits, image_path: str | None,
         served_model: str) -> Plan:
    """The call for ``req`` on ``pipe``, planned by ``pipe.prepare`` and held to ``limits``."""
    v = req.values
    if "prompt" not in v or not v["prompt"].strip():
        raise UserError("prompt is required: describe the video to generate")
    if "model" in v and v["model"] != served_model:
        raise UserError(f"this server serves model {served_model!r}, not {v['model']!r}: omit model or pass "
                        f"{served_model!r}")
    kwargs: dict[str, Any] = {k: v[k] for k in CALL_KEYS if k in v}
    if "size" in v:
        m = _SIZE.match(v["size"])
        if not m:
            raise UserError(f"size must be WIDTHxHEIGHT in pixels such as '832x480', got {_short(v['size'])}")
        width, height = int(m.group(1)), int(m.group(2))
        for key, got in (("width", width), ("height", height)):
            if key in kwargs and kwargs[key] != got:
                raise UserError(f"size {v['size']!r} and {key}={kwargs[key]} disagree: give one of them")
        kwargs["width"], kwargs["height"] = width, height
    if "seconds" in v:
        if "num_frames" in kwargs:
            raise UserError("give seconds or num_frames, not both")
        kwargs["num_frames"] = int(pipe.frames_for_seconds(v["seconds"]))
    if image_path is not None:
        kwargs["video" if req.image is not None and req.image.kind == "video" else "image"] = image_path
    for key in ("height", "width"):
        if key in kwargs and kwargs[key] < 1:
            raise UserError(f"{key} must be a positive number of pixels, got {kwargs[key]}")
    call = pipe.prepare(prompt=v["prompt"], **kwargs)
    cfg = call.cfg
    s = cfg.sampling
    _at_most("num_steps", s.num_steps, limits.max_steps, "--max-steps")
    _at_most("num_frames", s.num_frames, limits.max_frames, "--max-frames")
    if s.height * s.width > limits.max_pixels:
        raise UserError(f"size {s.width}x{s.height} has {s.height * s.width} pixels, more than this server's "
                        f"limit of {limits.max_pixels} (--max-pixels)")
    fps = int(cfg.output.fps or pipe.fps)
    return Plan(v["prompt"], {"prompt": v["prompt"], **kwargs}, f"{s.width}x{s.height}",
                _seconds_text(s.num_frames, fps), int(s.num_frames), int(s.num_steps), fps, call)


def _kind(name: str) -> str:
    if name in FIELDS:
        return FIELDS[name]
    close = difflib.get_close_matches(name, FIELDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserError(f"unknown field {_short(name)}{hint}; fields: {', '.join(FIELDS)}")


def _typed_json(name: str, kind: str, value: Any, limits: Limits) -> Any:
    if kind == "str":
        if not isinstance(value, str):
            raise UserError(f"{name} must be a string, got {type(value).__name__}")
        return _checked_text(name, value, limits)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{name} must be an integer, got {_short(value)}")
        return _checked_int(name, value)
    if kind == "seconds" and isinstance(value, str):
        return _typed_text(name, kind, value, limits)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{name} must be a number, got {_short(value)}")
    return _checked_float(name, float(value), positive=kind == "seconds")


def _typed_text(name: str, kind: str, text: str, limits: Limits) -> Any:
    if kind == "str":
        return _checked_text(name, text, limits)
    raw = text.strip()
    if kind == "int":
        if not re.fullmatch(r"[+-]?\d{1,30}", raw):
            raise UserError(f"{name} must be an integer, got {_short(text)}")
        return _checked_int(name, int(raw))
    try:
        number = float(raw) if len(raw) <= 40 else math.nan
    except ValueError:
        raise UserError(f"{name} must be a number, got {_short(text)}") from None
    return _checked_float(name, number, positive=kind == "seconds")


def _checked_text(name: str, text: str, limits: Limits) -> str:
    if name in ("prompt", "negative_prompt") and len(text) > limits.max_prompt_chars:
        raise UserError(f"{name} has {len(text)} characters, more than this server's limit of "
                        f"{limits.max_prompt_chars} (--max-prompt-chars)")
    if name not in ("prompt", "negative_prompt") and len(text) > 200:
        raise UserError(f"{name} is {len(text)} characters long; it is a short value")
    if "\x00" in text:
        raise UserError(f"{name} contains a NUL character")
    return text


def _checked_int(name: str, value: int) -> int:
    if name == "seed" and not 0 <= value <= MAX_SEED:
        raise UserError(f"seed must be between 0 and {MAX_SEED}, got {_short(value)}")
    if name != "seed" and not 1 <= value <= 10**9:
        raise UserError(f"{name} must be a positive integer, got {_short(value)}")
    return value


def _checked_float(name: str, value: float, positive: bool) -> float:
    if not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, got {value}")
    if positive and value <= 0:
        raise UserError(f"{name} must be more than 0, got {value:g}")
    if not positive and value < 0:
        raise UserError(f"{name} must be >= 0, got {value:g}")
    return value


def _at_most(name: str, value: int, limit: int, flag: str) -> None:
    if value > limit:
        raise UserError(f"{name}={value} is more than this server's limit of {limit} ({flag})")


def _seconds_text(frames: int, fps: int) -> str:
    return f"{frames / fps:.3f}".rstrip("0").rstrip(".")


def _no_constant(name: str) -> Any:
    raise UserError(f"malformed JSON body: {name} is not a JSON number")


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
