"""The ``vidax`` command line.

  vidax run CONFIG.yaml [key=value ...] [--prompts FILE] [--dry-run] [--quiet] [--debug]
  vidax list-models [--json]
  vidax plugins [--json]
  vidax show-config MODEL_ID        (or: vidax show MODEL_ID)
  vidax bench CONFIG.yaml [key=value ...] [--reference diffusers] [--sweep key=v1,v2]
  vidax serve CONFIG.yaml [key=value ...] [--host 127.0.0.1] [--port 8000] [--max-queue 64] [--output-dir DIR]

User mistakes end with exit code 2 and one ``error:`` line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import traceback
from typing import Sequence

from vidax_core import __version__, stop_signals
from vidax_core.errors import PluginError, UserError
from vidax_core.stop_signals import Terminated

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


def _terminate(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second SIGTERM must not cut the cleanup short
    stop_signals.request(Terminated)
    if not stop_signals.in_gc_callback(frame):  # there the raise would be dropped: the run's next check raises it
        raise Terminated()


def _interrupt(signum, frame) -> None:
    stop_signals.request(KeyboardInterrupt)
    if not stop_signals.in_gc_callback(frame):
        raise KeyboardInterrupt()


def _run_stopping_on_sigterm(args: argparse.Namespace) -> int:
    """``args.func(args)`` with SIGTERM handled like SIGINT, unless the embedding program handles it itself (or
    this is not the main thread, where no handler can be set); both signals recorded so that a run raises them
    again if their first raise is dropped (:mod:`vidax_core.stop_signals`). The handlers before are back
    afterwards."""
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return args.func(args)
    before_int = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, _terminate)
    if before_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        return args.func(args)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if before_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, before_int)
        stop_signals.clear()


def _positive_gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < 1e6):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in GiB (a positive number, e.g. 48)")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins
    from vidax_core.report.progress import Reporter

    plugins = get_plugins()
    cfg = config_mod.resolve(args.config, args.overrides, plugins.preset_for)
    reporter = Reporter(quiet=args.quiet)
    entries = _batch_entries(cfg, args.prompts)
    if args.dry_run:
        from vidax_core.report.dry_run import describe_plan

        print(describe_plan(cfg, plugins, device=args.device, host_memory_gib=args.host_memory))
        if entries is not None:
            from vidax_core.runner.batch import describe

            print(describe(entries, cfg.output))
        return 0
    if entries is not None:
        from vidax_core.runner.batch import run_batch

        made = run_batch(cfg, entries, plugins, reporter)
        print(f"made {len(made)} of {len(entries)} videos", file=sys.stderr)
        return 0
    from vidax_core.heap import freeze_imports
    from vidax_core.report import metrics
    from vidax_core.runner import loaded

    if getattr(args, "owns_process", False):  # the runner's collections skip the imported modules
        freeze_imports()
    result = loaded.run(cfg, plugins, reporter, startup_s=_process_seconds())
    reporter.log(metrics.summary(result.metrics, wall_s=_process_seconds()))
    if cfg.output.path:
        print(f"wrote {cfg.output.path}", file=sys.stderr)  # even with --quiet: the one line naming the result
    return 0


def _process_seconds() -> float | None:
    """Wall seconds since this process started (the interpreter, imports, JAX's start), None if unknown."""
    import time

    import psutil

    try:
        return max(time.time() - psutil.Process().create_time(), 0.0)
    except Exception:  # noqa: BLE001 - a platform without process times: no start-up figure
        return None


def _batch_entries(cfg, prompts_file: str | None):
    """The batch's (where, entry) list from ``--prompts FILE`` or the config's ``prompts:``, or None."""
    from vidax_core.runner import batch

    if prompts_file and cfg.prompts is not None:
        raise UserError("both --prompts and a prompts: list in the config: give one of them")
    if prompts_file:
        return batch.read_prompts_file(prompts_file)
    if cfg.prompts is not None:
        return batch.entries_from_config(cfg.prompts)
    return None


def cmd_list_models(args: argparse.Namespace) -> int:
    from vidax_core.plugins import get_plugins

    specs = list(get_plugins().registry)
    if args.json:
        print(json.dumps([s.as_dict() for s in specs], indent=2))
        return 0
    if not specs:
        print("no models installed: pip install a family plugin such as vidax-wan")
        return 0
    rows = [("id", "family", "tasks", "plugin", "version", "hub repo",
             "default config")]
    rows += [(s.id, s.family, ",".join(s.tasks), s.plugin, s.version, _repo_text(s), s.default_config or "-")
             for s in specs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _repo_text(spec) -> str:
    """The id's hub repo as ``list-models`` prints it: ``owner/name[@revision]``, or where its weights come from."""
    if spec.hub_repo:
        return spec.hub_repo + (f"@{spec.hub_revision}" if spec.hub_revision else "")
    return f"none (original: {spec.original_repo})" if spec.original_repo else "none published"


def cmd_plugins(args: argparse.Namespace) -> int:
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    counts: dict[str, int] = {}  # per plugin object (a distribution may register several: vidax-cosmos' two)
    for spec in plugins.registry:
        owner = plugins.owner(spec)
        counts[owner] = counts.get(owner, 0) + 1
    infos = [
        {
            "name": i.name,
            "distribution": i.distribution,
            "version": i.version,
            "module": i.module,
            "hooks": list(i.hooks),  # the hooks its class overrides; the others are FamilyPlugin's defaults
            "models": counts.get(i.name, 0),
            "error": i.error,
        }
        for i in plugins.infos
    ]
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    if not infos:
        print("no plugins installed")
    for i in infos:
        state = (f"FAILED: {i['error']}" if i["error"] else
                 f"{i['models']} models, overrides: {', '.join(i['hooks']) or 'none (the defaults)'}")
        print(f"{i['name']} ({i['distribution']} {i['version']}): {state}")
    return 0


#: what a model that fills a PREDICTABLE key in takes it from (show-config's note)
PREDICTED = {"sampling.num_frames": "prediction: a duration head", "sampling.guidance_scale": "guider config"}


def cmd_show_config(args: argparse.Namespace) -> int:
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    preset = plugins.preset_for(args.model_id)
    merged = config_mod.merge(config_mod.defaults_dict(), preset, {"model": {"id": args.model_id}})
    cfg = config_mod.validate(merged, required=False)
    spec = plugins.registry.get(args.model_id)
    if spec.hub_repo:
        print(f"# model.checkpoint: {spec.hub_repo}, the id's published diffusers repo, downloaded into the Hugging "
              "Face cache on first use; or a local folder, a ComfyUI models folder, model.files (README)")
    else:
        print(f"# model.checkpoint has no default for {args.model_id}: no diffusers-layout repo is published; "
              f"set a local folder (see {_model_doc(spec)})")
    if spec.original_repo:
        print(f"# the original release vidax also reads: {spec.original_repo}")
    for key in config_mod.unset_required(cfg):  # left to the user: say so, not refuse
        print(f"# {key} has no default for {args.model_id}: set it (null below)")
    predicts = getattr(spec, "predicts", ()) or ()
    for key in config_mod.PREDICTABLE:
        if config_mod._get(cfg, key) is None:  # LTX-2.5's frame count, Motif-Video's guider scale: the model's
            how = (f" or leave it null for the checkpoint's ({PREDICTED[key]})"
                   if key.split(".")[-1] in predicts else "")
            print(f"# {key} has no default for {args.model_id}: set it{how} (null below)")
    print(config_mod.to_yaml(cfg), end="")
    return 0


def _model_doc(spec) -> str:
    return f"docs/models/{spec.family}.md"


class _ArgumentError(Exception):
    """A command-line syntax mistake, printed as one ``error:`` line (argparse would print its usage first)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        import re

        m = re.match(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:  # an unknown command: name the nearest one
            import difflib

            commands = re.findall(r"'([^']+)'", m.group(2))
            close = difflib.get_close_matches(m.group(1), commands, n=1, cutoff=0.5)
            close = close or [c for c in commands if c.startswith(m.group(1)) or m.group(1).startswith(c)][:1]
            hint = f"did you mean `{self.prog} {close[0]}`? " if close else ""
            message = f"unknown command {m.group(1)!r}: {hint}commands: {', '.join(commands)}"
        raise _ArgumentError(f"{message} (see `{self.prog} --help`)")


class _TopParser(_Parser):
    """The ``vidax`` parser: its help names the installed families, read from the registry when help is shown."""

    def format_help(self) -> str:
        self.description = _description()
        return super().format_help()


def _description() -> str:
    try:
        from vidax_core.plugins import get_plugins

        specs = list(get_plugins().registry)
    except Exception:  # noqa: BLE001 - help must print whatever a plugin does
        specs = []
    families: dict[str, int] = {}
    for spec in specs:
        families[spec.family] = families.get(spec.family, 0) + 1
    if not families:
        return "Video diffusion inference in JAX. No model family is installed: pip install a plugin such as vidax-wan."
    listed = ", ".join(f"{f} ({n})" for f, n in sorted(families.items()))
    return (f"Video diffusion inference in JAX. Installed families (model ids): {listed}; "
            "`vidax list-models` names every id.")


MAX_LINE = 1000  # characters of an error line: a message that lists too much is cut in its middle


def _one_line(text: object) -> str:
    line = " ".join(str(text).split())
    if len(line) > MAX_LINE:  # the end says what to do: keep it
        line = f"{line[:MAX_LINE * 2 // 3]} [...] {line[-MAX_LINE // 3:]}"
    return line


def build_parser() -> argparse.ArgumentParser:
    p = _TopParser(prog="vidax", description="Video diffusion inference in JAX.")
    p.add_argument("--version", action="version", version=f"vidax {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("run", help="generate a video from a YAML config or model.id=... alone",
                       description="Generate a video. Keys: see `vidax show-config MODEL_ID`.")
    r.add_argument("config", nargs="?", help="YAML config file (optional if model.id=... is given)")
    r.add_argument("overrides", nargs="*", help="key=value overrides, e.g. sampling.num_steps=30 output.path=out/a.mp4")
    r.add_argument("--dry-run", action="store_true", help="validate and print the plan without loading weights")
    r.add_argument("--device", default=None, metavar="NAME",
                   help="with --dry-run: size and time the run for this device (h200, h100, a100, l40s, b200, "
                        "tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e; default: this machine's)")
    r.add_argument("--host-memory", type=_positive_gib, default=None, metavar="GIB",
                   help="with --dry-run: say whether the run fits a host with this much memory (GiB; default: what "
                        "this machine has available)")
    r.add_argument("--prompts", metavar="FILE", help="a batch: one prompt a line (text) or one JSON object a line "
                   "(.jsonl, with per-line overrides); one load for all, numbered outputs")
    r.add_argument("--quiet", "-q", action="store_true", help="no progress bars or status lines (the output path "
                   "is still printed)")
    r.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    r.set_defaults(func=cmd_run)

    lm = sub.add_parser("list-models", help="list installed model ids")
    lm.add_argument("--json", action="store_true", help="print a JSON list of objects")
    lm.set_defaults(func=cmd_list_models)

    pl = sub.add_parser("plugins", help="list installed plugins and their hooks")
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(func=cmd_plugins)

    sc = sub.add_parser("show-config", aliases=["show"],
                        help="print the merged default config of a model, ready to edit")
    sc.add_argument("model_id")
    sc.set_defaults(func=cmd_show_config)

    from vidax_core.bench.command import add_parser as add_bench_parser

    add_bench_parser(sub)
    from vidax_core.serve.command import add_parser as add_serve_parser

    add_serve_parser(sub)
    from vidax_core.lora.inspect import add_parser as add_lora_parser

    add_lora_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``vidax`` command; ``argv`` None: this process's own arguments (the process is the command's, and its
    heap may be frozen after the imports, :mod:`vidax_core.heap`), else a caller's (an embedding program's heap is
    left alone)."""
    owns_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except _ArgumentError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    args.owns_process = owns_process
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        with _hub_bars(not getattr(args, "quiet", False)):  # --quiet: huggingface_hub's download bars too
            return _run_stopping_on_sigterm(args) if args.command == "run" else args.func(args)
    except UserError as exc:
        _close_bars()
        if args.debug:
            traceback.print_exc()
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as exc:
        _close_bars()
        # Temporary outputs were removed while the exception unwound. Leave at once: a normal interpreter
        # shutdown while XLA may still be compiling on its own threads can crash (seen as SIGSEGV).
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"error: {how}; no partial output was written", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED)
    except BrokenPipeError:  # e.g. `vidax list-models --json | head`
        sys.stderr.close()
        return 0
    except MemoryError:  # a host allocation the sizes asked for: a line, not a traceback
        _close_bars()
        if args.debug:
            traceback.print_exc()
        print("error: the host ran out of memory (MemoryError): lower the sizes this command asks for (frames, "
              "height, width, batch, blocks) or free memory", file=sys.stderr)
        return EXIT_USER_ERROR
    except PluginError as exc:  # a plugin's own hook failed: its authors, not vidax's, can fix it
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}; rerun with --debug for the traceback and report it to the plugin's authors",
              file=sys.stderr)
        return 1
    except Exception as exc:  # a bug, not a user mistake: say so, keep the traceback behind --debug
        _close_bars()
        if args.debug:
            traceback.print_exc()
        first = (str(exc).splitlines() or [""])[0]
        print(f"error: internal error ({type(exc).__name__}: {first}); rerun with --debug for the traceback "
              "and please report it", file=sys.stderr)
        return 1
    except BaseException as exc:  # e.g. a Rust panic surfacing from a native library; exits stay clean
        if isinstance(exc, SystemExit):
            raise
        _close_bars()
        if args.debug:
            traceback.print_exc()
        print(f"error: internal error ({type(exc).__name__}: {_one_line(exc)[:200]}); rerun with --debug for "
              "the traceback and please report it", file=sys.stderr)
        return 1


@contextlib.contextmanager
def _hub_bars(shown: bool):
    """huggingface_hub's progress bars off for the command when not ``shown``, as they were afterwards."""
    if shown:
        yield
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was:
            enable_progress_bars()


def _close_bars() -> None:
    """End any progress bar's line before the ``error:`` line (bars exist only once the runner was imported)."""
    progress = sys.modules.get("vidax_core.report.progress")
    if progress is not None:
        progress.close_bars()
    sys.stderr.flush()


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; ``key=value`` overrides may sit anywhere after the command, the config file anywhere too."""
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may follow options (`vidax run cfg.yaml --quiet a=b`): argparse leaves those over
    takes_overrides = getattr(args, "command", None) in ("run", "bench", "serve")
    stray = [e for e in extra if e.startswith("-") or "=" not in e or not takes_overrides]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    # "vidax run a=b cfg.yaml": a config path that contains '=' is an override, not a config
    if getattr(args, "config", None) and "=" in args.config and not args.config.endswith((".yaml", ".yml")):
        args.overrides = [args.config, *args.overrides]
        args.config = None
    if takes_overrides:
        files = [o for o in args.overrides if "=" not in o]
        if args.config is None and len(files) == 1 and files[0].endswith((".yaml", ".yml")):
            args.config = files[0]
            args.overrides = [o for o in args.overrides if o is not files[0]]
        elif files:
            extra_files = [f for f in files if f.endswith((".yaml", ".yml"))]
            if extra_files:
                raise _ArgumentError(
                    f"only one config file can be given, got {args.config} and {', '.join(extra_files)}: "
                    "merge them into one file or pass the extra keys as key=value"
                )
    return args


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
