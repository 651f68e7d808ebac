"""SkyReels-V2 DiT parity against diffusers' SkyReelsV2Transformer3DModel (torch is a test-only oracle): per-sample
timesteps (the T2V pipeline), per-frame timesteps with the fps embedding (diffusion forcing) and causal frame
blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.testing.reference import randomize_  # noqa: E402
from vidax_skyreels.convert_dit import load_dit  # noqa: E402
from vidax_skyreels.dit import SkyReelsDiTConfig  # noqa: E402

TINY = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
            text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=32, inject_sample_info=True)


def reference(num_frame_per_block: int):
    from diffusers import SkyReelsV2Transformer3DModel

    torch.manual_seed(0)
    model = SkyReelsV2Transformer3DModel(**TINY, num_frame_per_block=num_frame_per_block).eval().float()
    randomize_(model, 3, 0.1)
    return model, {k: v.detach().numpy() for k, v in model.state_dict().items()}


CASES = {  # name -> (timesteps, frames per causal block, latent height = width)
    "per-sample": (np.array([999.0, 412.0], np.float32), 1, 8),
    "per-frame": (np.array([[999, 999, 714, 0], [20, 412, 412, 999]], np.float32), 1, 8),
    "per-frame-causal": (np.array([[999, 999, 714, 0], [20, 412, 412, 999]], np.float32), 2, 8),
    # a 16x16 video: each latent frame is one token, so a per-frame modulation has as many rows as the tokens
    "one-token-frames-causal": (np.array([[999, 999, 714, 0], [20, 412, 412, 999]], np.float32), 2, 2),
    "one-token-frames-per-sample-causal": (np.array([999.0, 412.0], np.float32), 2, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_parity_with_diffusers(case):
    timestep, blocks, side = CASES[case]
    model_t, tensors = reference(blocks)
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 4, 4, side, side)).astype(np.float32)
    context = rng.standard_normal((2, 7, 16)).astype(np.float32)
    per_frame = timestep.ndim == 2
    with torch.no_grad():
        want = np.concatenate([model_t(torch.from_numpy(latents[b:b + 1]), torch.from_numpy(timestep[b:b + 1]).long(),
                                       torch.from_numpy(context[b:b + 1]), enable_diffusion_forcing=per_frame,
                                       fps=[b], return_dict=False)[0].numpy() for b in range(2)])
    cfg = SkyReelsDiTConfig.from_config(dict(TINY, num_frame_per_block=blocks))
    model = load_dit(cfg, tensors)
    got = np.asarray(jax.jit(lambda m, *a: m(*a))(model, jnp.asarray(latents), jnp.asarray(timestep),
                                                 jnp.asarray(context), None, jnp.asarray([0, 1])))
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"skyreels dit {case}: rel={rel:.2e} max_abs={np.abs(got - want).max():.2e}")
    assert rel < 1e-5, rel
