"""Parity assertions against a reference, with the tolerances every family uses.

* :func:`assert_run_matches` — a ``vidax run``'s saved latents and frames against the diffusers pipeline's, from the
  same noise (both within :data:`RUN_BOUND` relative L2).
* :func:`assert_fp32_parity` — a component (DiT, VAE, encoder, scheduler) in fp32 against the reference run in fp32
  and in float64. The float64 reference is the truth; vidax's fp32 result may be ``factor`` times as far from it as
  the two fp32 implementations' own rounding errors together: the reference's (its fp32 run vs its float64 run) and
  vidax's (:func:`fp32_error`, measured on vidax itself). Both depend on the CPU (vector width, which matmul kernel,
  the exp/tanh approximations), so a bound from the reference's error alone can break on another x86-64 machine
  while one from both holds wherever each implementation is as accurate as fp32 allows.
* :func:`move_one_ulp` — every float32 array of a structure moved one ulp at random: the probe behind
  :func:`fp32_error` and the family kit's derived tolerance.
* :func:`fp32_error` — vidax's own fp32 rounding error on given inputs, measured as how far its output moves when
  every floating input (weights included) moves by one fp32 ulp in a seeded random direction: a backward-stable
  fp32 computation's forward error is of that size, and the measure needs no float64 build of the model. It also
  covers what the reference's float64 run leaves in fp32 (diffusers embeds timesteps in fp32 whatever the model's
  dtype), which the reference's own error cannot show.

Only numpy is imported here.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

RUN_BOUND = 1e-4  # end to end: latents and frames within 1e-4 relative L2 of the reference pipeline's
FP32_FACTOR = 4.0


def rel_l2(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def max_abs(a: Any, b: Any) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def assert_run_matches(label: str, latents, frames, ref_latents, ref_frames, *, latent_shape, frame_shape,
                       bound: float = RUN_BOUND) -> tuple[float, float]:
    """Print the errors, assert the shapes and ``rel <= bound`` for latents and frames; return (rel, frames rel)."""
    rel, frel = rel_l2(latents, ref_latents), rel_l2(frames, ref_frames)
    print(f"[{label}] latents rel {rel:.3e} max abs {max_abs(latents, ref_latents):.3e}; frames rel {frel:.3e} "
          f"max abs {max_abs(frames, ref_frames):.3e}")
    assert latents.shape == ref_latents.shape == tuple(latent_shape)
    assert frames.shape == ref_frames.shape == tuple(frame_shape)
    assert rel <= bound and frel <= bound, (rel, frel, bound)
    return rel, frel


def _nudge(x: Any, rng: np.random.Generator) -> Any:
    if isinstance(x, dict):
        return {k: _nudge(v, rng) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_nudge(v, rng) for v in x)
    a = np.asarray(x) if isinstance(x, np.ndarray) else None
    if a is None or a.dtype != np.float32:
        return x
    sign = rng.integers(0, 2, a.shape).astype(bool)
    return np.where(sign, np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf)))


def move_one_ulp(x: Any, seed: int = 0) -> Any:
    """``x`` with every float32 numpy array in it (nested dicts, lists and tuples followed) moved one ulp up or down
    at random (``seed``); other values unchanged."""
    return _nudge(x, np.random.default_rng(seed))


def fp32_error(fn: Callable[..., Any], *args: Any, seed: int = 0, base: Any = None) -> float:
    """Max abs change of ``fn(*args)`` when every float32 numpy array in ``args`` (nested dicts, lists and tuples
    followed: pass the weights too) moves one ulp up or down at random. ``base``: ``fn(*args)`` if already computed."""
    base = fn(*args) if base is None else base
    return max_abs(fn(*_nudge(args, np.random.default_rng(seed))), base)


def fp32_bound(ref32: Any, ref64: Any, vidax_err: float, *, factor: float = FP32_FACTOR,
               floor: float = 0.0) -> float:
    """The max-abs bound on vidax fp32 vs the float64 reference: ``factor x (reference fp32 error + vidax fp32
    error)``, never below ``floor``."""
    return max(factor * (max_abs(ref32, ref64) + vidax_err), floor)


def assert_fp32_parity(label: str, got: Any, ref32: Any, ref64: Any, *, vidax_err: float,
                       factor: float = FP32_FACTOR, floor: float = 0.0) -> float:
    """``got`` (vidax, fp32) within :func:`fp32_bound` of the float64 reference ``ref64``; the reference's fp32 run
    must really differ from its float64 run (else the float64 run did not happen). Returns the max-abs error."""
    got, ref32, ref64 = (np.asarray(a, np.float64) for a in (got, ref32, ref64))
    assert got.shape == ref64.shape == ref32.shape, (got.shape, ref32.shape, ref64.shape)
    err, ref_err = max_abs(got, ref64), max_abs(ref32, ref64)
    bound = fp32_bound(ref32, ref64, vidax_err, factor=factor, floor=floor)
    print(f"{label}: max abs vs float64 {err:.3e}, rel {rel_l2(got, ref64):.3e}; bound {bound:.3e} = {factor:g} x "
          f"(reference fp32 {ref_err:.3e} + vidax fp32 {vidax_err:.3e}); |ref| max {np.abs(ref64).max():.3f}")
    assert ref_err > 0, f"{label}: the float64 reference equals the fp32 one: it did not run in float64"
    assert err <= bound, (label, err, bound)
    return err


def fp32_tolerance(ref32: Any, ref64: Any, *, factor: float = 8.0, floor: float = 1e-7,
                   vidax_err: float = 0.0) -> float:
    """A relative (to max |ref64|) tolerance: ``factor`` times the reference's and vidax's own fp32 errors relative
    to max |ref64|, never below ``floor``; for checks written on relative max-abs errors."""
    scale = max(float(np.abs(np.asarray(ref64, np.float64)).max()), 1e-30)
    return max(factor * (max_abs(ref32, ref64) + vidax_err) / scale, floor)
