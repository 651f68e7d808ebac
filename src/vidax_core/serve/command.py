"""``vidax serve CONFIG.yaml [key=value ...]``: load once, then serve the OpenAI videos API and the page at ``/``.

  vidax serve CONFIG.yaml [key=value ...] [--host 127.0.0.1] [--port 8000] [--max-queue 64] [--output-dir DIR]
              [--max-prompt-chars N] [--max-steps N] [--max-frames N] [--max-pixels N] [--max-body-bytes N]
              [--max-upload-pixels N]

See docs/serving.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile

from vidax_core.errors import UserError
from vidax_core.serve.limits import Limits

_LIMIT_FLAGS = ("max_queue", "max_prompt_chars", "max_steps", "max_frames", "max_pixels", "max_body_bytes",
                "max_upload_pixels")


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="serve a loaded model over HTTP (OpenAI videos API and a browser page)",
                       description="Load once and serve HTTP: POST /v1/videos (OpenAI videos API), GET / (a page). "
                                   "See docs/serving.md.")
    s.add_argument("config", nargs="?", help="YAML config file (optional if model.id=... is given)")
    s.add_argument("overrides", nargs="*", help="key=value overrides, as `vidax run` takes them")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0 = any free port)")
    s.add_argument("--output-dir", default=None, help="where videos and uploads go (default: the folder of "
                                                       "output.path); the server writes nowhere else")
    defaults = Limits()
    for name in _LIMIT_FLAGS:
        s.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name),
                       help=f"limit (default {getattr(defaults, name)})")
    s.add_argument("--quiet", "-q", action="store_true", help="no status lines")
    s.add_argument("--log-requests", action="store_true", help="log every HTTP request on stderr")
    s.add_argument("--no-keep-cache", action="store_true", help="a causal model (AnyFlow-FAR) keeps no KV cache "
                   "between jobs (device memory); a continuation then starts from the video's last frames")
    s.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    s.set_defaults(func=cmd_serve)


def limits_of(args: argparse.Namespace) -> Limits:
    values = {name: getattr(args, name) for name in _LIMIT_FLAGS}
    for name, value in values.items():
        if value < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    return Limits(**values)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def default_output_dir(config: str | None, overrides: list[str]) -> str:
    """The folder of the config's ``output.path`` (the loaded pipe itself writes nothing, so its copy is unset)."""
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins

    cfg = config_mod.resolve(config, overrides, get_plugins().preset_for)
    return os.path.dirname(str(cfg.output.path or "")) or "."


def _needs_upload(config: str | None, overrides: list[str]):
    """For an image-to-video model served with no ``image``: a function writing the placeholder it loads with
    (:func:`vidax_core.runner.preflight.placeholder_image`); None otherwise (the config's image, if any, is the
    default of requests without an upload)."""
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins
    from vidax_core.runner.preflight import needs_image, placeholder_image

    plugins = get_plugins()
    cfg = config_mod.resolve(config, overrides, plugins.preset_for)
    if cfg.image is not None or not needs_image(plugins.registry.get(cfg.model.id)):
        return None
    return lambda folder: placeholder_image(folder, cfg.sampling.width, cfg.sampling.height)


def cmd_serve(args: argparse.Namespace) -> int:
    limits = limits_of(args)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be from 0 to 65535, got {args.port}")
    import vidax

    from vidax_core.serve import multihost
    from vidax_core.serve.app import Server

    output_dir = args.output_dir or default_output_dir(args.config, args.overrides)
    overrides, placeholder = list(args.overrides), tempfile.TemporaryDirectory(prefix="vidax-serve-")
    stand_in = _needs_upload(args.config, overrides)
    if stand_in is not None:  # loaded with a stand-in: every request brings its own first frame
        overrides.append(f"image={stand_in(placeholder.name)}")
    from vidax_core.heap import freeze_imports

    if getattr(args, "owns_process", False):  # the runner's collections skip the imported modules
        freeze_imports()
    # no config file: the overrides alone (model.id=... and the rest), as `vidax run` takes them
    pipe = vidax.load(args.config if args.config is not None else {}, *overrides, quiet=args.quiet)
    try:
        many = multihost.process_count() > 1
        if many and multihost.process_index() != 0:
            multihost.follow(pipe, os.path.join(output_dir, f".follower-{multihost.process_index()}"))
            return 0
        runner = multihost.LeaderRunner(pipe) if many else None
        server = Server(pipe, host=args.host, port=args.port, output_dir=output_dir, limits=limits, runner=runner,
                        quiet=args.quiet, log_requests=args.log_requests, upload_required=stand_in is not None,
                        keep_cache=not args.no_keep_cache)
        # the address is printed even with --quiet: with --port 0 it is the only way to learn it
        print(f"serving {server.app.model_id} on {server.url} (page at {server.url}/, API at {server.url}/v1/videos); "
              f"videos go to {server.app.output_dir}", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop ends as cleanly as Ctrl-C
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            server.app.log("stopping")
        finally:
            server.close()
    finally:
        pipe.close()
        placeholder.cleanup()
    return 0
