"""Many prompts, one load: the ``prompts:`` list of a config or ``vidax run --prompts FILE``.

A prompts file is text (one prompt a line; blank lines and lines starting with ``#`` are skipped) or JSONL
(``.jsonl``: one object a line with ``prompt`` and per-line overrides such as ``seed``, ``image``, ``num_frames``,
``options`` or ``output``). Every line is checked before any weight loads and a bad one is reported with its line
number. Each video goes to its line's ``output`` or to ``output.path`` numbered (``out/video.mp4`` ->
``out/video_0001.mp4``; ``save_latents``, ``save_frames``, ``save_audio`` and ``metrics`` are numbered alike); an output that
already exists is skipped unless ``output.overwrite=true``, so a killed batch resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vidax_core.api import CALL_ARGUMENTS
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
    """(where, entry) per prompt of a text or JSONL file; ``where`` names the file and line."""
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise UserError(f"--prompts {path} is larger than {MAX_FILE_BYTES >> 20} MiB")
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise UserError(f"--prompts {path} cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"--prompts {path}: not UTF-8 text (byte {exc.start})") from None
    jsonl = path.endswith((".jsonl", ".ndjson"))
    out: list[tuple[str, Any]] = []
    for n, line in enumerate(text.splitlines(), 1):
        where = f"--prompts {path} line {n}"
        if not line.strip() or (not jsonl and line.lstrip().startswith("#")):
            continue
        if jsonl:
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise UserError(f"{where}: not a JSON object ({str(exc).splitlines()[0]})") from None
        else:
            entry = line.strip()
        out.append((where, entry))
        if len(out) > MAX_PROMPTS:
            raise UserError(f"--prompts {path}: more than {MAX_PROMPTS} prompts; split the file")
    if not out:
        raise UserError(f"--prompts {path} holds no prompt")
    return out


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


def check_items(model: Any, items: list[Item]) -> list[Any]:
    """Every item's call config, checked as a run checks it, before any weight loads."""
    from vidax_core.api import Pipe

    pipe = Pipe(model)
    configs = []
    for it in items:
        if it.skip:
            configs.append(None)
            continue
        try:
            cfg = pipe._call_config({**it.args, "output": it.outputs})
            model.plan_call(cfg, build_vae=False)
        except UserError as exc:
            raise UserError(f"{it.where}: {exc}") from None
        configs.append(cfg)
    return configs


def run_batch(cfg: Any, entries: list[tuple[str, Any]], plugins: Any, reporter: Any) -> list[dict]:
    """Generate every entry with one load; returns the metrics of the videos made (skipped ones have none)."""
    import dataclasses

    from vidax_core.runner import pipeline
    from vidax_core.runner.loaded import LoadedModel

    items = plan_items(entries, cfg.output)
    base = dataclasses.replace(cfg, prompts=None, output=dataclasses.replace(
        cfg.output, path=None, save_latents=None, save_frames=None, save_audio=None, metrics=None))
    model = LoadedModel(base, plugins, reporter, load_weights=False)
    try:
        configs = check_items(model, items)
        todo = [(it, c) for it, c in zip(items, configs) if not it.skip]
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
        for it, c in todo:
            result = model.generate(c)
            done.append(result.metrics)
            bar.update(1)
            reporter.log(f"{it.where}: {pipeline.summary(result.metrics)}")
            if c.output.path:  # even with --quiet: the line naming each result
                print(f"wrote {c.output.path}", file=sys.stderr, flush=True)
        bar.close()
        return done
    finally:
        model.close()
