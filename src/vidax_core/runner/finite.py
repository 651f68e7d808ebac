"""The finite-output guard: a run whose latents, frames or audio turn NaN or infinite stops with one ``error:``
line naming where, and writes nothing (an mp4 of NaN frames is black, silently).

The step loop already waits for each step's latents (:func:`vidax_core.runner.sampling.sample_pass`); after it the
guard dispatches one jitted reduction (``isfinite(...).all()`` per latent stream) without waiting for it, and reads
the flag one step later, when the next step's wait has made it ready: no device round trip is added to a step.
The last step's flag is read when the pass ends. Decoded frames and audio are on the host already; they are
checked there, before any file is written (a chunked run checks each window's frames before appending them to
its mp4).

The ranges known to cause it are refused before anything loads, where a check can know them (an option beyond
its meaning, a norm epsilon that is not positive, an initial-noise file of absurd magnitude): this guard is for
what only the numbers show.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.errors import UserError

HINT = ("lower sampling.guidance_scale and the model's scale-like options, check sampling.initial_noise and the "
        "checkpoint's weights and configs, or run at model.dtype=float32")


@jax.jit
def _flags(tree: Any) -> Any:
    return jax.tree.map(lambda a: jnp.all(jnp.isfinite(a)), tree)


def _read(flag: jax.Array) -> bool:
    """A replicated scalar flag as a Python bool (this process's copy: under ``jax.distributed`` the array
    spans devices other processes hold)."""
    return bool(np.asarray(flag.addressable_shards[0].data))


class StepGuard:
    """The latents of one pass's step loop: :meth:`after` each step (once its latents are ready), :meth:`end`
    after the last."""

    def __init__(self, label: str, num_steps: int) -> None:
        self.label, self.num_steps = label, int(num_steps)
        self._pending: tuple[int, Any] | None = None

    def after(self, i: int, x: Any) -> None:
        """Step ``i`` made ``x``: check the step before it, then queue this one's reduction."""
        self._check()
        self._pending = (i, _flags(x))

    def end(self) -> None:
        self._check()

    def _check(self) -> None:
        if self._pending is None:
            return
        i, flags = self._pending
        self._pending = None
        bad = [name for name, f in _named(flags) if not _read(f)]
        if bad:
            raise UserError(f"the {_streams(bad)} turned non-finite (NaN or infinite) at step {i + 1} of "
                            f"{self.num_steps} ({self.label}): nothing was written; {HINT}")


def check_start(latents: Any, label: str) -> None:
    """A pass's start latents (host or device arrays): non-finite ones are refused before the first step."""
    bad = [name for name, f in _named(_flags(latents)) if not _read(f)]
    if bad:
        raise UserError(f"the start {_streams(bad)} of {label} are not finite (NaN or infinite): nothing was "
                        f"written; check sampling.initial_noise and the options that shape the start latents")


def check_output(frames: Any, audio: Any = None, label: str = "the video") -> None:
    """Decoded frames (and audio) on the host, before any file is written."""
    for what, a in (("frames", frames), ("audio", audio)):
        if a is None:
            continue
        a = np.asarray(a)
        if a.dtype.kind == "f" and not np.isfinite(np.sum(a, dtype=np.float64)):
            raise UserError(f"the decoded {what} of {label} are not finite (NaN or infinite: the mp4 would be "
                            f"black or silent): nothing was written; {HINT}")


def _named(flags: Any) -> list[tuple[str, Any]]:
    if isinstance(flags, dict):
        return [(str(k), v) for k, v in sorted(flags.items(), key=lambda kv: str(kv[0]))]
    return [(name, leaf) for name, leaf in zip(_leaf_names(flags), jax.tree.leaves(flags))]


def _leaf_names(tree: Any) -> list[str]:
    leaves = jax.tree.leaves(tree)
    return ["latents"] if len(leaves) == 1 else [f"latents[{n}]" for n in range(len(leaves))]


def _streams(names: list[str]) -> str:
    if names == ["latents"]:
        return "latents"
    return "latents (" + ", ".join(n for n in names) + ")"
