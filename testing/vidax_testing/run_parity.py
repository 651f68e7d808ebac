"""The end-to-end parity check every family's e2e test makes: a ``vidax run``'s saved latents and frames against
the diffusers pipeline's, from the same noise (../shared/FAMILIES.md: both within 1e-4 relative L2)."""

from __future__ import annotations

import numpy as np

BOUND = 1e-4


def assert_run_matches(label: str, latents, frames, ref_latents, ref_frames, *, latent_shape, frame_shape,
                       bound: float = BOUND) -> tuple[float, float]:
    """Print the errors, assert the shapes and ``rel <= bound`` for latents and frames; return (rel, frames rel)."""
    rel = float(np.linalg.norm(latents - ref_latents) / np.linalg.norm(ref_latents))
    frel = float(np.linalg.norm(frames - ref_frames) / np.linalg.norm(ref_frames))
    print(f"[{label}] latents rel {rel:.3e} max abs {np.abs(latents - ref_latents).max():.3e}; frames rel {frel:.3e} "
          f"max abs {np.abs(frames - ref_frames).max():.3e}")
    assert latents.shape == ref_latents.shape == tuple(latent_shape)
    assert frames.shape == ref_frames.shape == tuple(frame_shape)
    assert rel <= bound and frel <= bound
    return rel, frel
