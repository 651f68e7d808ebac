"""The noise draws of a chunked run (:mod:`vidax_core.windows`): ``noise_0``, ``noise_1``, ... of a
``sampling.initial_noise`` .npz in the reference's draw order, or the seed's.

Draw ``n`` of shape ``s`` is the archive's ``noise_n`` (checked against ``s``) or, without a file,
``jax.random.normal(fold_in(key(seed), n), s)``. The archive's draw names and shapes are checked against the run's
planned draws before any weight loads (other members, such as the latent streams of the run a frame stage follows,
are left alone); each member is read when its draw comes. A run that draws once also takes
a .npy: the array the reference pipeline takes as ``latents=``.
"""

from __future__ import annotations

import re
import zipfile
from typing import Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io import noise as N


DRAW = re.compile(r"noise_\d+")  # the draws; other members (a run's latent streams beside them) are not ours


def draw_name(n: int) -> str:
    return f"noise_{n}"


def check_draws(path: str, shapes: Sequence[tuple[int, ...]]) -> None:
    """A one-line error unless ``path`` is a .npz holding exactly noise_0..noise_{n-1} with the planned shapes (or,
    for a run that draws once, a .npy of that shape: what the reference pipeline takes as ``latents=``), every
    value finite and of sane magnitude."""
    where = f"sampling.initial_noise {path}"
    want = [draw_name(n) for n in range(len(shapes))]
    how = (f"this run draws noise {len(shapes)} times: give a .npz holding noise_0 .. noise_{len(shapes) - 1} "
           "(numpy.savez), each in the reference pipeline's draw order and layout (see the family's docs page)")
    if not N.is_zip(path):
        if len(shapes) == 1:
            N.check_noise_shapes(path, tuple(shapes[0]))
            return
        raise UserError(f"{where} is a single array, but {how}")
    with N._open(path, where) as f:
        try:
            with zipfile.ZipFile(f) as z:
                found = {k: v for k, v in N._members(z, path).items() if DRAW.fullmatch(k)}
                if sorted(found) != sorted(want):
                    extra = sorted(set(found) - set(want))[:3]
                    missing = sorted(set(want) - set(found), key=lambda m: int(m.split("_")[1]))[:3]
                    raise UserError(f"{where} holds {len(found)} arrays; {how}"
                                    + (f" (missing {', '.join(missing)})" if missing else "")
                                    + (f" (unexpected {', '.join(extra)})" if extra else ""))
                for name, shape in zip(want, shapes):
                    with z.open(found[name]) as m:
                        h = N.read_header(m, found[name].file_size, f"{where}: {name}")
                        N.check_shape(h, tuple(shape), f"{where}: {name}")
                        N.scan_values(m, h, f"{where}: {name}")  # a finite draw times 1e38 turns the run to NaN
        except UserError:
            raise
        except N.ZIP_ERRORS as exc:
            raise UserError(f"{where} is not a readable .npz archive ({type(exc).__name__}): {how}") from None


class Draws:
    """``draw(shape)`` -> the run's next draw (float32, host), from the archive ``path`` or the ``seed``."""

    def __init__(self, seed: int, path: str | None = None) -> None:
        self.seed, self.path, self.count = int(seed), path, 0

    def __call__(self, shape: Sequence[int]) -> np.ndarray:
        n, shape = self.count, tuple(int(v) for v in shape)
        self.count += 1
        if self.path and not N.is_zip(self.path):  # a run that draws once: the .npy is its noise
            return N.load_initial_noise(self.path, shape)
        if self.path:
            where = f"sampling.initial_noise {self.path}: {draw_name(n)}"
            with N._open(self.path, where) as f, zipfile.ZipFile(f) as z:
                members = N._members(z, self.path)
                if draw_name(n) not in members:
                    raise UserError(f"{where} is missing: the run draws more noise than the file holds")
                return N._read_member(z, members[draw_name(n)], shape, where)
        import jax
        import jax.numpy as jnp

        key = jax.random.fold_in(jax.random.key(self.seed), n)
        return np.asarray(jax.random.normal(key, shape, jnp.float32))
