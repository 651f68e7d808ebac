"""Chat templates: render a tokenizer's jinja ``chat_template`` as transformers' ``apply_chat_template`` does.

Decoder-LLM text encoders (HunyuanVideo's Llama-3, Qwen2.5-VL, Gemma-3) wrap the prompt in a chat template
before tokenizing. The template comes from the checkpoint (``chat_template.jinja`` or the ``chat_template`` entry
of ``tokenizer_config.json``) or is a string the family gives. Rendering uses the same jinja2 setup as
transformers (sandboxed, ``trim_blocks``, ``lstrip_blocks``, loop controls, ``raise_exception``, a ``tojson``
that does not HTML-escape, ``strftime_now``), with the tokenizer's special tokens (``bos_token``...) visible to
the template, so the text, and hence the token ids, are the reference's.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from vidax_core.errors import UserError

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json stores it: a string or an AddedToken dict with ``content``."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


def special_tokens(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    """``{"bos_token": "<s>", ...}`` from a tokenizer_config.json dict (the variables transformers passes)."""
    out = {}
    for key in SPECIAL_TOKEN_KEYS:
        text = _token_text(tokenizer_config.get(key))
        if text is not None:
            out[key] = text
    return out


MAX_TEMPLATE_BYTES = 1 << 20
MAX_RENDER_CHARS = 1 << 20  # a prompt's chat text; a template that writes more is broken or hostile
MAX_LOOP_STEPS = 1 << 20  # range() items one render may draw, over all its loops
MAX_REPEAT = 1 << 20  # length of a string or list made by * or **


class TemplateFailure(Exception):
    """A chat template that cannot render (syntax, undefined name, raise_exception, sandbox, a bound)."""


def load_chat_template(source: str | Path | Mapping[str, Any], name: str = "default") -> str:
    """The chat template of a tokenizer folder (``chat_template.jinja``, else tokenizer_config.json's
    ``chat_template``) or of a tokenizer_config dict. A list of named templates picks ``name``."""
    if isinstance(source, Mapping):
        config = source
    else:
        folder = Path(source)
        jinja_file = folder / "chat_template.jinja"
        if jinja_file.is_file():
            raw = jinja_file.read_bytes()[: MAX_TEMPLATE_BYTES + 1]
            if len(raw) > MAX_TEMPLATE_BYTES:
                raise UserError(f"{jinja_file} is larger than {MAX_TEMPLATE_BYTES >> 20} MiB: re-download it")
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{jinja_file} is not UTF-8 text (byte {exc.start}): fix or re-download it") from None
        cfg_file = folder / "tokenizer_config.json"
        if not cfg_file.is_file():
            raise UserError(f"no chat template in {folder}: expected chat_template.jinja or tokenizer_config.json")
        from vidax_core.io.checkpoint import read_json_file

        config = read_json_file(str(cfg_file))
        if not isinstance(config, Mapping):
            raise UserError(f"{cfg_file} must hold a JSON object")
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get(name)
    if not isinstance(template, str):
        raise UserError(f"tokenizer config has no chat template named {name!r}: pass the family's template string")
    return template


def _environment():
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:  # pragma: no cover - jinja2 is a dependency of vidax-core
        raise UserError("chat templates need jinja2: pip install 'jinja2>=3.1.6'") from e

    from jinja2.compiler import CodeGenerator

    class BoundedCodeGenerator(CodeGenerator):
        """``a ~ b`` joins through :func:`_bounded_join` (a macro doubling a string would otherwise grow it
        without limit before any output is written)."""

        def visit_Concat(self, node, frame):
            self.write("environment.bounded_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        """transformers' sandbox, with the size of every value a template builds bounded: ``*`` / ``**`` / ``+``
        results, ``~`` joins, and the width and count arguments of calls and filters (``'x' * 10**9``,
        ``'x'.ljust(10**9)``, ``'x'|center(10**9)``)."""

        code_generator_class = BoundedCodeGenerator
        intercepted_binops = frozenset({"*", "**", "+"})

        def call_binop(self, context, operator, left, right):
            if operator == "**":
                if isinstance(right, (int, float)) and isinstance(left, (int, float)) and abs(right) > 64 \
                        and abs(left) > 1:
                    raise TemplateFailure("a power too large to compute")
                return left ** right
            if operator == "+":
                if hasattr(left, "__len__") and hasattr(right, "__len__") and len(left) + len(right) > MAX_REPEAT:
                    raise TemplateFailure(f"a value longer than {MAX_REPEAT}")
                return left + right
            if isinstance(left, int) and not isinstance(right, (int, float)):
                left, right = right, left
            if isinstance(right, int) and hasattr(left, "__len__") and len(left) * max(right, 0) > MAX_REPEAT:
                raise TemplateFailure(f"a repeated value longer than {MAX_REPEAT}")
            return left * right

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja2's signature
            _check_sizes((getattr(__obj, "__self__", None), *args), kwargs)
            return super().call(__context, __obj, *args, **kwargs)

        def getattr(self, obj, attribute):
            if isinstance(obj, str) and attribute in ("format", "format_map"):
                _check_sizes((obj,), {})  # the sandbox wraps str.format: its widths are checked here
            return super().getattr(obj, attribute)

        @staticmethod
        def bounded_join(parts):
            text = "".join(map(str, parts))
            if len(text) > MAX_REPEAT:
                raise TemplateFailure(f"a joined value longer than {MAX_REPEAT}")
            return text

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.filters = {name: _bounded_filter(f) for name, f in env.filters.items()}
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def _check_sizes(args, kwargs) -> None:
    """Integer arguments (widths, counts) and %-format widths a call or filter gets stay below ``MAX_REPEAT``."""
    import re

    for v in (*args, *kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_REPEAT:
            raise TemplateFailure(f"an argument of {v} (at most {MAX_REPEAT})")
        if isinstance(v, str) and len(v) < 4096 and any(int(w) > MAX_REPEAT
                                                        for w in re.findall(r"[%{:<>^=]\D?(\d{7,})", v)):
            raise TemplateFailure(f"a format width above {MAX_REPEAT}")


def _bounded_filter(fn):
    import functools as ft

    @ft.wraps(fn)
    def bounded(*args, **kwargs):
        _check_sizes(args, kwargs)
        return fn(*args, **kwargs)

    return bounded


@functools.lru_cache(maxsize=16)
def _compile(template: str):
    try:
        return _environment().from_string(template)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - jinja2's syntax errors, and whatever a broken template raises
        raise TemplateFailure(_reason(exc)) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it recurses without end"
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Budget:
    """A ``range`` for templates whose items, over one render, are bounded by ``MAX_LOOP_STEPS``."""

    def __init__(self) -> None:
        self.left = MAX_LOOP_STEPS

    def range(self, *args):
        r = range(*args)
        if len(r) > self.left:
            raise TemplateFailure(f"its loops run more than {MAX_LOOP_STEPS} steps")
        self.left -= len(r)
        return r


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = False,
    special: Mapping[str, str] | None = None,
    where: str = "the chat template",
    **kwargs: Any,
) -> str:
    """The text of ``messages`` (``[{"role": ..., "content": ...}]``) under ``template``.

    ``special`` holds the tokenizer's special tokens (:func:`special_tokens`); ``kwargs`` are further template
    variables, as ``apply_chat_template(..., tokenize=False, **kwargs)`` passes them. A template that cannot
    render, or renders more than ``MAX_RENDER_CHARS``, is one :class:`UserError` naming ``where``.
    """
    chat = [dict(m) for m in messages]
    try:
        compiled = _compile(template)
        budget = _Budget()
        parts: list[str] = []
        size = 0
        for piece in compiled.generate(
                messages=chat, tools=None, documents=None, add_generation_prompt=add_generation_prompt,
                range=budget.range, **{**dict(special or {}), **kwargs}):
            size += len(piece)
            if size > MAX_RENDER_CHARS:
                raise TemplateFailure(f"it writes more than {MAX_RENDER_CHARS} characters")
            parts.append(piece)
        return "".join(parts)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a foreign template is "cannot render"
        reason = str(exc) if isinstance(exc, TemplateFailure) else _reason(exc)
        raise UserError(f"{where} cannot render a prompt ({reason}): fix or re-download it") from None
