"""Reading user configuration text: YAML files, ``key=value`` overrides, and the merge of layers.

Everything here turns foreign text into plain Python values (dicts, lists, str, int, float, bool, None) and never
evaluates anything: no OmegaConf interpolation (``${...}`` in a prompt or a path stays literal), no YAML tags
beyond the safe ones. The values of string keys (prompts, paths, ids) given as overrides are taken verbatim, not
parsed as YAML, so ``prompt=&`` or ``negative_prompt='`` is text. Every problem is one :class:`UserError` line.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import reprlib
import types
import typing
from typing import Any, Mapping, Sequence

import yaml

from vidax_core.errors import UserError

MAX_CONFIG_BYTES = 1 << 20  # a run config is a few hundred bytes; anything near this is not one
MAX_NODES = 10_000  # containers + scalars in one config (counted through YAML aliases)
MAX_DEPTH = 32

class _YamlRepr(reprlib.Repr):
    """reprlib's short reprs, with YAML's spelling of the values a user writes: null, true, false."""

    def repr_NoneType(self, value: Any, level: int) -> str:  # noqa: N802 - reprlib's naming
        return "null"

    def repr_bool(self, value: Any, level: int) -> str:
        return "true" if value else "false"


_short = _YamlRepr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxdict, _short.maxlevel = 60, 60, 6, 6, 3
_short.maxlong = 40


def short_repr(value: Any) -> str:
    """A repr of a user value that fits on one line of an error message."""
    return " ".join(_short.repr(value).split())


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def check_size(data: Any, what: str) -> None:
    """Refuse values too nested or too large to be a config (YAML aliases can make a small file huge)."""
    budget = [MAX_NODES]

    def walk(node: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise UserError(f"{what} is too large to be a run config (over {MAX_NODES} values)")
        if depth > MAX_DEPTH:
            raise UserError(f"{what} is nested too deeply to be a run config (over {MAX_DEPTH} levels)")
        if isinstance(node, dict):
            for k, v in node.items():
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, depth + 1)

    walk(data, 0)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's float syntax: YAML 1.1 needs a dot and a signed exponent, so
    ``1e-300`` and ``1e308`` were read as strings; here they are the numbers a user means."""


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+
                  |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?)$""", re.X),
    list("-+0123456789."))


def _yaml_text(text: str, what: str) -> Any:
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise UserError(f"{what} is not valid YAML: {one_line(exc)}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise UserError(f"{what} is not valid YAML ({type(exc).__name__}: {one_line(exc)[:120]})") from None
    check_size(data, what)
    return data


def load_yaml_file(path: str) -> dict[str, Any]:
    """A user YAML file as a plain dict: it must exist, be a regular file of modest size, and hold a mapping."""
    if "\0" in path:
        raise UserError("config file name contains a NUL byte")
    if not os.path.exists(path):
        raise UserError(f"config file {path} does not exist")
    if not os.path.isfile(path):
        raise UserError(f"config file {path} is not a regular file")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UserError(f"config file {path} is over {MAX_CONFIG_BYTES >> 20} MiB: not a run config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"config file {path} is not valid YAML: not UTF-8 text (byte {exc.start})") from None
    data = _yaml_text(text, f"config file {path}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of keys at the top level")
    return data


def field_type(root: type, dotted: str) -> Any:
    """The annotation of ``dotted`` inside dataclass ``root`` (None for an unknown key)."""
    tp: Any = root
    for part in dotted.split("."):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            return None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return None
        tp = hints[part]
    return tp


def is_text_type(tp: Any) -> bool:
    """``str`` or ``str | None``: values taken verbatim from the command line."""
    if tp is str:
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args == [str]
    return False


def parse_value(key: str, raw: str, tp: Any) -> Any:
    """The value of one ``key=value`` override: verbatim text for string keys, a YAML value otherwise."""
    if is_text_type(tp):
        if tp is not str and raw in ("null", "~", "None"):
            return None
        return raw
    return _yaml_text(raw, f"the value of override {key}")


def parse_overrides(items: Sequence[str], root: type) -> dict[str, Any]:
    """``key=value`` arguments into a nested dict (later arguments win)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"argument {short_repr(item)} is not key=value (e.g. sampling.num_steps=30)")
        key, raw = item.split("=", 1)
        key = key.strip()
        parts = key.split(".")
        if not key or any(not p or not p.replace("_", "a").replace("-", "a").isalnum() for p in parts):
            raise UserError(f"override {short_repr(item)} has no valid key before '=' (e.g. sampling.num_steps=30)")
        value = parse_value(key, raw, field_type(root, key))
        node = out
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
    return out


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge plain dicts left to right: a mapping over a mapping merges key by key; anything else replaces."""

    def over(base: Any, top: Any) -> Any:
        if isinstance(base, Mapping) and isinstance(top, Mapping):
            out = dict(base)
            for k, v in top.items():
                out[k] = over(out[k], v) if k in out else copy.deepcopy(v)
            return out
        return copy.deepcopy(top)

    result: dict[str, Any] = {}
    for layer in layers:
        result = over(result, dict(layer))
    return result
