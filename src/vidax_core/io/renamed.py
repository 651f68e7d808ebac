"""A lazy view of a tensor mapping under other key names: how an original-layout checkpoint answers in diffusers
terms without reading any tensor (``key_fn(original) -> diffusers name``, or None to leave a key out)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

import numpy as np

from vidax_core.errors import UserError


class RenamedTensors(Mapping[str, np.ndarray]):
    def __init__(self, source: Mapping[str, Any], key_fn: Callable[[str], str | None]) -> None:
        self.source = source
        self.original: dict[str, str] = {}
        for key in source:
            new = key_fn(key)
            if new is None:
                continue
            if new in self.original:
                raise UserError(f"checkpoint keys {self.original[new]!r} and {key!r} both map to {new!r}")
            self.original[new] = key

    def __getitem__(self, key: str) -> np.ndarray:
        return self.source[self.original[key]]

    def nbytes(self, key: str) -> int:
        src = self.source
        if hasattr(src, "nbytes"):
            return src.nbytes(self.original[key])
        return int(np.asarray(src[self.original[key]]).nbytes)

    def dtype(self, key: str) -> np.dtype:
        from vidax_core.quant.source import dtype_of

        return dtype_of(self.source, self.original[key])

    def shape(self, key: str) -> tuple[int, ...]:
        src = self.source
        if hasattr(src, "shape"):
            return tuple(src.shape(self.original[key]))
        return tuple(np.shape(src[self.original[key]]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.original)

    def __len__(self) -> int:
        return len(self.original)
