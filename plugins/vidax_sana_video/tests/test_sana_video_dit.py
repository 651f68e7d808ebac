"""SANA-Video DiT parity against diffusers' ``SanaVideoTransformer3DModel`` (torch is a test-only oracle), fp32
against the float64 reference (``assert_fp32_parity``: 4 x both implementations' own fp32 errors), for every
architecture variant the config can express and the two timestep forms the pipelines pass:

* the published layout (q/k RMS-normed across heads, biased q/k/v, patch (1, 2, 2)) with one timestep per sample
  (text-to-video) and per token with frame 0 at zero (image-to-video, which vidax gives per token frame);
* ``qk_norm`` as a layer norm or an L2 norm over the full width, and none, with one head (the per-head kinds run
  only with one head, where they are the full-width ones: the processors norm before the head split, so diffusers
  fails on them with more heads; refused), ``attention_bias`` off,
  ``norm_elementwise_affine`` on (an affine LayerNorm before the feed-forward), a learned-sigma head
  (``out_channels = 2 in_channels``: the pipelines keep the first half), a temporal patch of 2 with another
  ``mlp_ratio`` and head layout (per token-frame timesteps over two latent frames each);
* the prompt mask: masked tokens do not matter.

Each variant converts the reference's own state dict with the plugin's key table. The bound can fail: the
normaliser rotated like the numerator, or the timestep of frame 0 not zeroed, each land far past it.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core import UserError, abstract_model, convert, materialize  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_error  # noqa: E402
from vidax_core.testing.reference import randomize_, reference_in, state_arrays  # noqa: E402
from vidax_sana_video import dit as dit_lib  # noqa: E402
from vidax_sana_video.convert_dit import DIT_RULES  # noqa: E402
from vidax_sana_video.tiny import TINY_DIT  # noqa: E402

pytestmark = pytest.mark.xdist_group("sana_video_dit")

GRID = (4, 8, 12)  # latent frames, height, width
TEXT = 7
ONE_HEAD = {"num_attention_heads": 1, "attention_head_dim": 24, "num_cross_attention_heads": 1,
            "cross_attention_head_dim": 24}
VARIANTS = {  # several flags per variant: each run is a few seconds of CPU
    "published": {},
    "layer_norm_qk_affine_norm2_learned_sigma": {
        "qk_norm": "layer_norm_across_heads", "attention_bias": False, "norm_elementwise_affine": True,
        "norm_eps": 1e-5, "out_channels": 2 * TINY_DIT["in_channels"]},
    "l2_qk_patch_211_heads": {
        "qk_norm": "l2", "patch_size": (2, 1, 1), "mlp_ratio": 3.0, "num_attention_heads": 3, "attention_head_dim": 8,
        "num_cross_attention_heads": 4, "cross_attention_head_dim": 6, "rope_max_seq_len": 16},
    "no_qk_norm_one_head": {"qk_norm": None, **ONE_HEAD},
}


def build(variant: str):
    from diffusers import SanaVideoTransformer3DModel

    torch.manual_seed(0)
    model = SanaVideoTransformer3DModel(**{**TINY_DIT, **VARIANTS[variant]}).eval().float()
    randomize_(model, 5, 0.2)
    cfg = dit_lib.SanaVideoDiTConfig.from_config(dict(model.config))
    return model, state_arrays(model), cfg


def inputs(cfg, per_token: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    mask = np.ones((2, TEXT), np.int64)
    mask[1, 4:] = 0
    return {"latents": rng.standard_normal((2, cfg.in_channels, *GRID)).astype(np.float32),
            "timestep": np.array([937.5, 250.0], np.float32), "per_token": per_token,
            "hidden": rng.standard_normal((2, TEXT, cfg.caption_channels)).astype(np.float32), "mask": mask}


def token_frames(cfg) -> int:
    return GRID[0] // cfg.patch_size[0]


def run_reference(model, x, dtype) -> np.ndarray:
    cfg = model.config
    t = torch.from_numpy(x["timestep"]).to(dtype)
    if x["per_token"]:  # the I2V pipeline's t * (1 - conditioning_mask), frame 0 conditioned
        pt, ph, pw = cfg.patch_size
        mask = torch.zeros(2, 1, GRID[0] // pt, GRID[1] // ph, GRID[2] // pw, dtype=dtype)
        mask[:, :, 0] = 1.0
        t = t.view(2, 1, 1, 1, 1).expand(mask.shape) * (1 - mask)
    with reference_in(model, dtype) as m:
        out = m(hidden_states=torch.from_numpy(x["latents"]).to(dtype),
                encoder_hidden_states=torch.from_numpy(x["hidden"]).to(dtype),
                encoder_attention_mask=torch.from_numpy(x["mask"]), timestep=t, return_dict=False)[0]
    if cfg.out_channels == 2 * cfg.in_channels:  # learned sigma: the pipelines keep the first half
        out = out[:, :cfg.in_channels]
    return out.double().numpy()


@functools.lru_cache(maxsize=None)
def compiled(cfg):
    """The abstract model of ``cfg`` and its call jitted once (a second set of weights reuses the program)."""
    graphdef, state, flat = abstract_model(lambda: dit_lib.SanaVideoDiT(cfg, rngs=nnx.Rngs(0)))
    call = jax.jit(lambda st, *a: nnx.merge(graphdef, st)(*a))
    return graphdef, state, flat, call


def run_vidax(cfg, weights, x) -> np.ndarray:
    graphdef, state, flat, call = compiled(cfg)
    model = materialize(graphdef, state, convert(weights, DIT_RULES, flat, component="transformer"))
    t = x["timestep"]
    if x["per_token"]:  # vidax: one timestep per token frame, frame 0 at zero
        t = np.where(np.arange(token_frames(cfg))[None] == 0, np.float32(0), t[:, None]).astype(np.float32)
    return np.asarray(call(nnx.state(model), x["latents"], t, {"hidden": x["hidden"], "mask": x["mask"]}))


@pytest.mark.parametrize("variant, per_token", [("published", False), ("published", True),
                                               *[(v, v.startswith("l2")) for v in VARIANTS if v != "published"]])
def test_dit_matches_diffusers(variant, per_token):
    model, weights, cfg = build(variant)
    x = inputs(cfg, per_token)
    got = run_vidax(cfg, weights, x)
    ref32, ref64 = run_reference(model, x, torch.float32), run_reference(model, x, torch.float64)
    err = fp32_error(lambda w, lat: run_vidax(cfg, w, dict(x, latents=lat)), weights, x["latents"], base=got)
    assert got.shape == (2, cfg.in_channels, *GRID)
    assert_fp32_parity(f"SANA-Video DiT {variant}{' per token' if per_token else ''}", got, ref32, ref64,
                       vidax_err=err)


def test_masked_prompt_tokens_do_not_matter():
    model, weights, cfg = build("published")
    x = inputs(cfg, False)
    hidden = x["hidden"].copy()
    hidden[1, 4:] = 100.0  # the masked tokens of sample 1
    a, b = run_vidax(cfg, weights, x), run_vidax(cfg, weights, dict(x, hidden=hidden))
    np.testing.assert_array_equal(a[1], b[1])
    assert np.abs(a[0] - run_vidax(cfg, weights, dict(x, hidden=hidden * 0 + 1))[0]).max() > 1e-3


def test_unsupported_configs_are_one_line_each():
    base = dict(TINY_DIT)
    for change, fragment in [({"guidance_embeds": True}, "guidance_embeds=true"),
                             ({"qk_norm": "fp32_layer_norm"}, "qk_norm='fp32_layer_norm' is not built"),
                             ({"qk_norm": "rms_norm"}, "norms each head"),
                             ({"cross_attention_dim": None}, "must be set"),
                             ({"cross_attention_dim": 32}, "must equal the model width 24"),
                             ({"out_channels": 3}, "out_channels=3")]:
        with pytest.raises(UserError, match=fragment) as e:
            dit_lib.SanaVideoDiTConfig.from_config({**base, **change})
        assert "\n" not in str(e.value)
    assert dataclasses.replace(dit_lib.SanaVideoDiTConfig.from_config(base)).hidden == 60
