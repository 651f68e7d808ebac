"""Many prompts, one load: the ``prompts:`` list of a config or ``vidax run --prompts FILE``.

A prompts file is text (one prompt a line; blank lines and lines starting with ``#`` are skipped), JSONL
(``.jsonl`` / ``.ndjson``, any case: one object a line with ``prompt`` and per-line overrides such as ``seed``,
``image``, ``num_frames``, ``options`` or ``output``) or JSON (``.json``: a list of such objects or prompt strings).
A text file whose every line is a JSON object is read as JSONL (a prompt is never a JSON object). The file must be
a regular file of at most 64 MiB (a device or a FIFO is refused: it may never end). Every line is checked before
any weight loads and a bad one is reported with its line number.
Each video goes to its line's ``output`` or to ``output.path`` numbered (``out/video.mp4`` ->
``out/video_0001.mp4``; ``save_latents``, ``save_frames``, ``save_audio`` and ``metrics`` are numbered alike);
an output that
already exists is skipped unless ``output.overwrite=true``, so a killed batch resumes where it stopped.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vidax_core.config.call import CALL_ARGUMENTS, call_changes
from vidax_core.config.parse import short_repr
from vidax_core.errors import UserError

OUTPUT_KEYS = ("path", "save_latents", "save_frames", "save_audio", "metrics")
MAX_PROMPTS = 100_000
MAX_FILE_BYTES = 64 << 20


@dataclass
class Item:
    """One video of a batch: where it came from (for messages), its call arguments and its output paths."""

    where: str
    args: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    skip: bool = False


def read_prompts_file(path: str) -> list[tuple[str, Any]]:
    """(where, entry) per prompt of a text, JSONL or JSON file; ``where`` names the file and line."""
    text = _read_text(path)
    kind = os.path.splitext(path)[1].lower()
    lines = ((n, line) for n, line in enumerate(io.StringIO(text), 1) if line.strip())
    first = next(lines, None)
    if first is None:
        raise UserError(f"--prompts {path} holds no prompt")
    if kind == ".json" and not _is_object(first[1]):
        return _json_list(path, text)
    jsonl = kind in (".jsonl", ".ndjson", ".json") or _is_object(first[1])  # a prompt is never a JSON object
    out: list[tuple[str, Any]] = []
    for n, line in itertools.chain([first], lines):
        where = f"--prompts {path} line {n}"
        if jsonl:
            out.append((where, _json_line(where, line)))
        elif not line.lstrip().startswith("#"):
            out.append((where, line.strip()))
        if len(out) > MAX_PROMPTS:
            raise UserError(f"--prompts {path}: more than {MAX_PROMPTS} prompts; split the file")
    if not out:
        raise UserError(f"--prompts {path} holds no prompt")
    return out


def _read_text(path: str) -> str:
    """The file's text: a regular file (a device or a FIFO may never end) of at most MAX_FILE_BYTES."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
        if regular:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)  # bounded by the read itself: the file may grow after the stat
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise UserError(f"--prompts {path} cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not regular:
        raise UserError(f"--prompts {path} is not a regular file (a device, FIFO or folder): write the prompts to a "
                        "file")
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"--prompts {path} is larger than {MAX_FILE_BYTES >> 20} MiB: split it")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"--prompts {path}: not UTF-8 text (byte {exc.start})") from None


def _is_object(line: str) -> bool:
    head = line.strip()
    if not (head.startswith("{") and head.endswith("}")):
        return False
    try:
        return isinstance(json.loads(head), dict)
    except (ValueError, RecursionError):
        return False


def _json_line(where: str, line: str) -> Any:
    try:
        return json.loads(line)
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:
        raise UserError(f"{where}: not JSON ({str(exc).splitlines()[0][:120]})") from None


def _json_list(path: str, text: str) -> list[tuple[str, Any]]:
    """A ``.json`` file: a list of prompt strings and ``{"prompt": ...}`` objects (or one such object)."""
    data = _json_line(f"--prompts {path}", text)
    data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list):
        raise UserError(f"--prompts {path}: a .json file holds a list of prompts or {{\"prompt\": ...}} objects, got "
                        f"{type(data).__name__}")
    if not data:
        raise UserError(f"--prompts {path} holds no prompt")
    if len(data) > MAX_PROMPTS:
        raise UserError(f"--prompts {path}: more than {MAX_PROMPTS} prompts; split the file")
    return [(f"--prompts {path} item {n}", e) for n, e in enumerate(data)]


def entries_from_config(prompts: Any) -> list[tuple[str, Any]]:
    """(where, entry) per item of the config's ``prompts:`` list."""
    if not isinstance(prompts, Sequence) or isinstance(prompts, (str, bytes)):
        raise UserError("config key prompts must be a list of prompts (strings or {prompt: ..., seed: ...} mappings)")
    if not prompts:
        raise UserError("config key prompts is an empty list: give at least one prompt, or remove the key")
    return [(f"prompts[{n}]", e) for n, e in enumerate(prompts)]


def call_args(where: str, entry: Any) -> dict[str, Any]:
    """A line's call arguments (the Python API's keyword names); ``output`` may be a path or a mapping."""
    if isinstance(entry, str):
        return {"prompt": entry}
    if not isinstance(entry, Mapping):
        raise UserError(f"{where}: must be a prompt string or an object with a prompt, got {type(entry).__name__}")
    args = dict(entry)
    if not isinstance(args.get("prompt"), str):
        raise UserError(f"{where}: needs a \"prompt\" string")
    for key in args:
        if key not in CALL_ARGUMENTS:
            import difflib

            close = difflib.get_close_matches(str(key), CALL_ARGUMENTS, n=1)
            hint = f" — did you mean {close[0]}?" if close else f" (a line may set: {', '.join(CALL_ARGUMENTS)})"
            raise UserError(f"{where}: unknown key {key!r}{hint}")
    out = args.get("output")
    if isinstance(out, str):
        args["output"] = {"path": out}
    elif out is not None and not isinstance(out, Mapping):
        raise UserError(f"{where}: output must be a file path or a mapping of output.* keys")
    return args


def numbered(path: str | None, index: int, width: int) -> str | None:
    if not path:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}_{index:0{width}d}{ext}"


def plan_items(entries: list[tuple[str, Any]], base_output: Any) -> list[Item]:
    """Each entry's call arguments and output paths; duplicates refused, existing outputs marked skipped."""
    width = max(4, len(str(len(entries))))
    items: list[Item] = []
    seen: dict[str, str] = {}
    for n, (where, entry) in enumerate(entries, 1):
        args = call_args(where, entry)
        own = dict(args.pop("output", None) or {})
        outs = {k: own.get(k, numbered(getattr(base_output, k), n, width)) for k in OUTPUT_KEYS}
        outs["overwrite"] = bool(own.get("overwrite", base_output.overwrite))
        outs["fps"] = own.get("fps", base_output.fps)
        for k in OUTPUT_KEYS:
            p = outs[k]
            if p:
                key = os.path.abspath(str(p))
                if key in seen:
                    raise UserError(f"{where}: output.{k} {p} is also written by {seen[key]}: give each line its own")
                seen[key] = where
        files = [outs[k] for k in OUTPUT_KEYS if outs[k]]
        skip = bool(files) and not outs["overwrite"] and all(os.path.exists(str(f)) for f in files)
        items.append(Item(where, args, outs, skip))
    return items


def describe(entries: list[tuple[str, Any]], base_output: Any, shown: int = 3) -> str:
    """The dry run's ``batch:`` lines: how many videos (each line's keys and outputs checked), the first prompts."""
    items = plan_items(entries, base_output)
    skipped = sum(it.skip for it in items)
    head = (f"batch:      {len(items)} videos, one load" + (f" ({skipped} skipped: their outputs exist)" if skipped
                                                          else "")
            + "; each line's call is checked when the batch runs, before any weight loads")
    rows = [f"  {it.where}: {short_repr(it.args['prompt'])} -> {it.outputs['path'] or 'no mp4'}"
            for it in items[:shown]]
    more = [f"  ... and {len(items) - shown} more"] if len(items) > shown else []
    return "\n".join([head, *rows, *more])


def check_items(model: Any, items: list[Item]) -> list[Any]:
    """Every item's call planned (its config checked as a run checks it) before any weight loads: the plans the
    batch then runs (None for a skipped item)."""
    plans = []
    for it in items:
        if it.skip:
            plans.append(None)
            continue
        try:
            changes = call_changes(model.base, {**it.args, "output": it.outputs})
            plans.append(model.plan_call(model.call_config(**changes)))
        except UserError as exc:
            raise UserError(f"{it.where}: {exc}") from None
    return plans


def run_batch(cfg: Any, entries: list[tuple[str, Any]], plugins: Any, reporter: Any) -> list[dict]:
    """Generate every entry with one load; returns the metrics of the videos made (skipped ones have none)."""
    import dataclasses

    from vidax_core.report import metrics
    from vidax_core.runner.loaded import LoadedModel

    items = plan_items(entries, cfg.output)
    base = dataclasses.replace(cfg, prompts=None, output=dataclasses.replace(
        cfg.output, path=None, save_latents=None, save_frames=None, save_audio=None, metrics=None))
    model = LoadedModel(base, plugins, reporter, load_weights=False)
    try:
        plans = check_items(model, items)
        todo = [(it, p) for it, p in zip(items, plans) if not it.skip]
        for it in items:
            if it.skip:
                reporter.log(f"{it.where}: skipped, {it.outputs['path'] or 'its outputs'} already exists "
                             "(output.overwrite=true makes it again)")
        if not todo:
            reporter.log("every output of this batch exists already: nothing to do")
            return []
        model.load_weights()
        done = []
        bar = reporter.bar(len(todo), "batch", unit="video")
        for it, plan in todo:
            result = model.generate(plan=plan)
            done.append(result.metrics)
            bar.update(1)
            reporter.log(f"{it.where}: {metrics.summary(result.metrics)}")
            if plan.cfg.output.path:  # even with --quiet: the line naming each result
                print(f"wrote {plan.cfg.output.path}", file=sys.stderr, flush=True)
        bar.close()
        return done
    finally:
        model.close()
