"""multipart/form-data bodies (RFC 7578) as the OpenAI SDK (httpx) and browsers send them.

The whole body is in memory already (its size is capped before it is read), so parsing is a split on the boundary;
each part's headers are read with the standard library's email header parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message
from email.parser import BytesHeaderParser

from vidax_core.errors import UserError


@dataclass(frozen=True)
class Part:
    """One form field: ``filename`` is set (maybe empty) for a file upload, ``data`` holds its raw bytes."""

    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None

    def text(self) -> str:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"form field {self.name!r} is not UTF-8 text") from None


def boundary_of(content_type: str) -> str:
    """The ``boundary`` parameter of a multipart Content-Type header."""
    msg = Message()
    msg["content-type"] = content_type
    boundary = msg.get_param("boundary")
    if not isinstance(boundary, str) or not boundary or len(boundary) > 200:
        raise UserError("multipart/form-data request without a valid boundary in its Content-Type header")
    return boundary


def parse(body: bytes, content_type: str) -> list[Part]:
    """Every part of ``body``; a body that does not follow the multipart framing is a one-line UserError."""
    # a delimiter is CRLF "--" boundary; the CRLF before the first one is optional, so add it
    delim = b"\r\n--" + boundary_of(content_type).encode("latin-1")
    chunks = (b"\r\n" + body).split(delim)
    # chunks[0] is the preamble; the last one starts with "--" (the close delimiter) and holds the epilogue
    if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
        raise UserError("malformed multipart/form-data body: the closing boundary is missing")
    parts = []
    for chunk in chunks[1:-1]:
        line_end = chunk.find(b"\r\n")
        if line_end < 0 or chunk[:line_end].strip(b" \t"):
            raise UserError("malformed multipart/form-data body: a boundary is not on a line of its own")
        head, sep, data = chunk[line_end + 2:].partition(b"\r\n\r\n")
        if not sep:
            raise UserError("malformed multipart/form-data body: a part has no blank line after its headers")
        headers = BytesHeaderParser().parsebytes(head + b"\r\n\r\n")
        disposition = headers.get("content-disposition", "")
        if headers.get_content_disposition() != "form-data":
            raise UserError(f"malformed multipart/form-data body: a part's Content-Disposition is {disposition!r}")
        name = headers.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            raise UserError("malformed multipart/form-data body: a part has no field name")
        filename = headers.get_filename()
        ctype = headers.get_content_type() if headers.get("content-type") else None
        parts.append(Part(name, data, filename, ctype))
    return parts
