"""Helios DiT parity against diffusers' HeliosTransformer3DModel (torch is a test-only oracle): a chunk with its
history at the three scales (the coarse ones padded), with and without the amplified history keys and the
chunk-only cross-attention."""

from __future__ import annotations

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.testing.reference import randomize_  # noqa: E402
from vidax_helios.convert_dit import load_dit  # noqa: E402
from vidax_helios.dit import HeliosDiTConfig  # noqa: E402
from vidax_helios.tiny import TINY_DIT  # noqa: E402

CASES = {
    "base": {},
    "amplified-history": dict(is_amplify_history=True, history_scale_mode="per_head"),
    "cross-on-all-tokens": dict(guidance_cross_attn=False, zero_history_timestep=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_parity_with_diffusers(case):
    from diffusers import HeliosTransformer3DModel

    arch = {**TINY_DIT, **CASES[case]}
    torch.manual_seed(0)
    ref = HeliosTransformer3DModel(**arch).eval().float()
    randomize_(ref, 3, 0.1)
    tensors = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    rng = np.random.default_rng(0)
    b, c, hw = 2, 4, 6
    # history_sizes [4, 2, 1] with keep_first_frame: [prefix, long 4, mid 2, 1x 1, chunk 3] on frames 0..10
    idx = np.arange(11)
    inputs = dict(
        hidden_states=rng.standard_normal((b, c, 3, hw, hw)).astype(np.float32),
        timestep=np.array([871.25, 312.5], np.float32),
        encoder_hidden_states=rng.standard_normal((b, 7, 32)).astype(np.float32),
        indices_hidden_states=idx[None, 8:], indices_latents_history_short=np.concatenate([idx[:1], idx[7:8]])[None],
        indices_latents_history_mid=idx[None, 5:7], indices_latents_history_long=idx[None, 1:5],
        latents_history_short=rng.standard_normal((b, c, 2, hw, hw)).astype(np.float32),
        latents_history_mid=rng.standard_normal((b, c, 2, hw, hw)).astype(np.float32),
        latents_history_long=rng.standard_normal((b, c, 4, hw, hw)).astype(np.float32),
    )
    with torch.no_grad():
        want = ref(**{k: torch.from_numpy(np.asarray(v)) for k, v in inputs.items()}, return_dict=False)[0].numpy()
    model = load_dit(HeliosDiTConfig.from_config(arch), tensors)
    args = {k: jax.numpy.asarray(v) for k, v in inputs.items()}
    x, t, ctx = args.pop("hidden_states"), args.pop("timestep"), args.pop("encoder_hidden_states")
    got = np.asarray(jax.jit(lambda m, *a, **k: m(*a, **k))(model, x, t, ctx, **args))
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"helios dit {case}: rel={rel:.2e}")
    assert got.shape == want.shape == (b, c, 3, hw, hw)
    assert rel < 1e-5, rel
