"""``vidax bench``: timing and memory of a configured run (placeholder until the benchmark lands)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmark a config (per-step time, compile, decode, memory)")
    b.add_argument("config", nargs="?", help="YAML config file")
    b.add_argument("overrides", nargs="*", help="key=value overrides")
    b.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from .errors import UserError

    raise UserError("vidax bench is not available in this build")
