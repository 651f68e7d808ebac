"""Core GroupNorm (vidax_core.nn.group_norm) against torch ``nn.GroupNorm`` on video activations, channel-last.

Tolerance: the reference's own fp32 error (torch fp32 vs float64 on the same inputs) times a small factor.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.nn.group_norm import GroupNorm, group_norm  # noqa: E402

pytestmark = pytest.mark.xdist_group("nn_group_norm")


@pytest.mark.parametrize("groups,eps", [(4, 1e-6), (1, 1e-5), (8, 1e-6)])
def test_group_norm_matches_torch(groups, eps):
    rng = np.random.default_rng(groups)
    x = (3 + 2 * rng.standard_normal((2, 8, 3, 5, 6))).astype(np.float32)  # (B, C, T, H, W), non-zero mean
    ref = torch.nn.GroupNorm(groups, 8, eps=eps)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(1 + 0.1 * rng.standard_normal(8).astype(np.float32)))
        ref.bias.copy_(torch.from_numpy(0.1 * rng.standard_normal(8).astype(np.float32)))
        r32 = ref(torch.from_numpy(x)).numpy()
        r64 = ref.double()(torch.from_numpy(x).double()).numpy()
    norm = GroupNorm(8, groups, eps=eps)
    norm.scale[...] = ref.weight.detach().float().numpy()
    norm.bias[...] = ref.bias.detach().float().numpy()
    ours = np.moveaxis(np.asarray(norm(np.moveaxis(x, 1, -1))), -1, 1)
    floor = np.abs(r32 - r64).max()
    err = np.abs(ours - r64).max()
    print(f"groups={groups}: max abs vs fp64 {err:.3e} (torch fp32: {floor:.3e})")
    assert 0 < floor < 1e-4 and err <= 4 * floor


def test_group_norm_statistics_span_every_frame():
    """Normalising two halves of a clip apart differs from the whole clip: the statistics cover time too, unless
    ``axes`` narrows them to each frame (a per-frame 2-D GroupNorm)."""
    x = (np.random.default_rng(0).standard_normal((1, 4, 2, 2, 4))
         + np.arange(4)[:, None, None, None]).astype(np.float32)
    whole = np.asarray(group_norm(x, 2, eps=1e-6))
    halves = np.concatenate([np.asarray(group_norm(x[:, :2], 2, eps=1e-6)),
                             np.asarray(group_norm(x[:, 2:], 2, eps=1e-6))], 1)
    assert np.abs(whole - halves).max() > 0.5
    per_frame = np.asarray(group_norm(x, 2, eps=1e-6, axes=(2, 3)))
    frames = np.concatenate([np.asarray(group_norm(x[:, t : t + 1], 2, eps=1e-6)) for t in range(4)], 1)
    np.testing.assert_allclose(per_frame, frames, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="do not split"):
        GroupNorm(6, 4, eps=1e-6)(np.zeros((1, 2, 6), np.float32))
