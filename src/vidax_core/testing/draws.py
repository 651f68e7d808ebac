"""A reference pipeline's every noise draw, recorded and replayed (chunked runs, :mod:`vidax_core.windows`).

Pipelines that draw noise more than once (one draw per chunk or window, fresh noise at each step) cannot be
reproduced from one ``latents=`` array. :func:`record_draws` runs a diffusers pipeline while recording what its
module's ``randn_tensor``, ``torch.randn_like`` and seeded ``torch.randn`` (a ``generator`` given) return, in
order, as numpy; :func:`replay_draws` answers the same calls from such a list.
:func:`reference_windowed_outputs` runs a pipeline twice from the same draws (its
``output_type="latent"`` result, then its frames) and returns the draws as the ``noise_0``, ``noise_1``, ...
mapping a ``sampling.initial_noise`` .npz holds. torch is imported inside the functions.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any, Iterator

import numpy as np


@contextlib.contextmanager
def _patched(module: ModuleType, make) -> Iterator[None]:
    import torch

    saved_tensor, saved_like, saved_randn = module.randn_tensor, torch.randn_like, torch.randn
    inside = []  # a draw made inside another (randn_tensor calls torch.randn) is that draw, not a second one

    def once(draw, args, kwargs):
        if inside:
            return draw(*args, **kwargs)
        inside.append(True)
        try:
            return make(draw, args, kwargs)
        finally:
            inside.pop()

    def tensor(shape, generator=None, device=None, dtype=None, layout=None):
        return once(saved_tensor, (tuple(shape),), dict(generator=generator, device=device, dtype=dtype,
                                                        layout=layout))

    def like(x, *args, **kwargs):
        return once(lambda *_a, **_k: saved_like(x, *args, **kwargs), (tuple(x.shape),), {"dtype": x.dtype,
                                                                                          "device": x.device})

    def randn(*size, generator=None, **kwargs):  # a pipeline's own seeded draws (Helios' block noise)
        if generator is None or inside:
            return saved_randn(*size, generator=generator, **kwargs)
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        return once(lambda *_a, **_k: saved_randn(*size, generator=generator, **kwargs), (shape,),
                    {"dtype": kwargs.get("dtype"), "device": kwargs.get("device")})

    module.randn_tensor, torch.randn_like, torch.randn = tensor, like, randn
    try:
        yield
    finally:
        module.randn_tensor, torch.randn_like, torch.randn = saved_tensor, saved_like, saved_randn


@contextlib.contextmanager
def record_draws(module: ModuleType) -> Iterator[list[np.ndarray]]:
    """Inside the block, every draw of ``module.randn_tensor`` and ``torch.randn_like`` is appended to the
    yielded list (float32 numpy, in draw order)."""
    seen: list[np.ndarray] = []

    def make(draw, args, kwargs):
        out = draw(*args, **kwargs)
        seen.append(out.detach().float().cpu().numpy().copy())
        return out

    with _patched(module, make):
        yield seen


@contextlib.contextmanager
def replay_draws(module: ModuleType, draws: list[np.ndarray]) -> Iterator[None]:
    """Inside the block, the draws of ``module.randn_tensor`` and ``torch.randn_like`` are ``draws``, in order
    (each checked against the shape asked for)."""
    import torch

    queue = list(draws)

    def make(_draw, args, kwargs):
        if not queue:
            raise AssertionError("the pipeline draws more noise than was recorded")
        a = queue.pop(0)
        if tuple(a.shape) != tuple(args[0]):
            raise AssertionError(f"draw of shape {args[0]} replayed from one of {a.shape}")
        return torch.from_numpy(a.copy()).to(device=kwargs.get("device") or "cpu",
                                             dtype=kwargs.get("dtype") or torch.float32)

    with _patched(module, make):
        yield
    if queue:
        raise AssertionError(f"{len(queue)} recorded draws were not used")


def reference_windowed_outputs(pipe: Any, module: ModuleType, seed: int = 0,
                               **kwargs: Any) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(latents the pipeline returns with ``output_type="latent"``, its frames, its draws as ``{"noise_0": ...}``)
    from one seeded set of draws."""
    import torch

    torch.manual_seed(seed)
    with record_draws(module) as draws:
        latents = pipe(output_type="latent", generator=torch.Generator().manual_seed(seed), **kwargs).frames
    with replay_draws(module, draws):
        frames = pipe(output_type="np", **kwargs).frames
    return (np.asarray(latents, np.float32), np.asarray(frames, np.float32),
            {f"noise_{n}": a for n, a in enumerate(draws)})
