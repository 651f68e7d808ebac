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


def load_chat_template(source: str | Path | Mapping[str, Any], name: str = "default") -> str:
    """The chat template of a tokenizer folder (``chat_template.jinja``, else tokenizer_config.json's
    ``chat_template``) or of a tokenizer_config dict. A list of named templates picks ``name``."""
    if isinstance(source, Mapping):
        config = source
    else:
        folder = Path(source)
        jinja_file = folder / "chat_template.jinja"
        if jinja_file.is_file():
            return jinja_file.read_text(encoding="utf-8")
        cfg_file = folder / "tokenizer_config.json"
        if not cfg_file.is_file():
            raise UserError(f"no chat template in {folder}: expected chat_template.jinja or tokenizer_config.json")
        config = json.loads(cfg_file.read_text(encoding="utf-8"))
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get(name)
    if not isinstance(template, str):
        raise UserError(f"tokenizer config has no chat template named {name!r}: pass the family's template string")
    return template


@functools.lru_cache(maxsize=16)
def _compile(template: str):
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:  # pragma: no cover - jinja2 is a dependency of vidax-core
        raise UserError("chat templates need jinja2: pip install 'jinja2>=3.1.6'") from e

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = False,
    special: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> str:
    """The text of ``messages`` (``[{"role": ..., "content": ...}]``) under ``template``.

    ``special`` holds the tokenizer's special tokens (:func:`special_tokens`); ``kwargs`` are further template
    variables, as ``apply_chat_template(..., tokenize=False, **kwargs)`` passes them.
    """
    chat = [dict(m) for m in messages]
    return _compile(template).render(
        messages=chat, tools=None, documents=None, add_generation_prompt=add_generation_prompt,
        **{**dict(special or {}), **kwargs},
    )
