"""The prompt cleaning diffusers' Wan and Kandinsky 5 pipelines share (``prompt_clean``): HTML entities unescaped
twice, runs of whitespace collapsed to one space, the ends stripped. The reference also runs ``ftfy.fix_text``
first when ftfy is installed; vidax does not depend on it (it is the identity on plain text)."""

from __future__ import annotations

import html
import re


def prompt_clean(text: str) -> str:
    """The reference pipelines' prompt cleaning (HTML unescape twice, collapse whitespace)."""
    return re.sub(r"\s+", " ", html.unescape(html.unescape(text)).strip()).strip()
