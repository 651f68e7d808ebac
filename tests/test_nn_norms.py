"""Core norms (vidax_core.nn.norms) against torch / diffusers / transformers norms with random gains and biases.

The fp32 tolerance is the reference's own rounding noise: the same reference run in float64 on the same inputs
gives ``noise = |ref32 - ref64|``; ours (fp32) must be within a small multiple of it from ref64 (plus one ulp of the
output magnitude, for inputs where the reference happens to round exactly).
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.nn import norms

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")

EPS32 = float(np.finfo(np.float32).eps)


def _check(ours, module: torch.nn.Module, x: np.ndarray, factor: float = 4.0) -> float:
    """ours(x) vs module in fp32 and fp64; returns the error against fp64."""
    with torch.no_grad():
        r32 = module.float()(torch.from_numpy(x)).numpy()
        r64 = copy.deepcopy(module).double()(torch.from_numpy(x).double()).numpy()
    out = np.asarray(ours(jnp.asarray(x)), np.float64)
    noise = np.abs(r32 - r64).max()
    err = np.abs(out - r64).max()
    tol = factor * noise + EPS32 * np.abs(r64).max()
    assert err <= tol, (err, tol, noise)
    return err


def _randomise(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.ndim == 1 else 0.0))


def _x(shape, seed=0, offset=0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3 + offset).astype(np.float32)


def _set(var, value) -> None:
    var.set_value(jnp.asarray(np.asarray(value, np.float32)))


def _t(p) -> np.ndarray:
    return p.detach().numpy()


@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_rms_norm_matches_torch_and_diffusers(eps):
    from diffusers.models.normalization import RMSNorm as DiffusersRMSNorm

    x = _x((2, 7, 32))
    for ref in (torch.nn.RMSNorm(32, eps=eps), DiffusersRMSNorm(32, eps=eps, elementwise_affine=True)):
        _randomise(ref, 1)
        ours = norms.RMSNorm(32, eps=eps)
        _set(ours.scale, _t(ref.weight))
        _check(ours, ref, x)


def test_rms_norm_without_gain():
    from diffusers.models.normalization import RMSNorm as DiffusersRMSNorm

    ref = DiffusersRMSNorm(16, eps=1e-6, elementwise_affine=False)
    ours = norms.RMSNorm(16, eps=1e-6, affine=False)
    assert ours.scale is None
    _check(ours, ref, _x((3, 16), 2))


def test_gemma_rms_norm_matches_transformers():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    ref = Gemma3RMSNorm(24, eps=1e-6)
    _randomise(ref, 3)
    ref.weight.data -= 1.0  # Gemma stores w around 0 and applies 1 + w
    ours = norms.RMSNorm(24, eps=1e-6, gemma=True)
    _set(ours.scale, _t(ref.weight))
    _check(ours, ref, _x((2, 5, 24), 4))


def test_llama_rms_norm_bf16_bit_exact():
    """Llama rounds the normalised value to the input dtype before the gain: bf16 in, bf16 out, bit-exact."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    ref = LlamaRMSNorm(64, eps=1e-5)
    _randomise(ref, 5)
    ref = ref.to(torch.bfloat16)
    x = torch.from_numpy(_x((4, 9, 64), 6)).to(torch.bfloat16)
    with torch.no_grad():
        r = ref(x).float().numpy()
    ours = norms.RMSNorm(64, eps=1e-5, scale_in_input_dtype=True)
    _set(ours.scale, ref.weight.detach().float().numpy())
    out = ours(jnp.asarray(x.float().numpy()).astype(jnp.bfloat16))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(out.astype(jnp.float32)), r)
    # without the intermediate rounding the result differs somewhere (the option matters)
    plain = norms.RMSNorm(64, eps=1e-5)
    _set(plain.scale, ref.weight.detach().float().numpy())
    assert not np.array_equal(
        np.asarray(plain(jnp.asarray(x.float().numpy()).astype(jnp.bfloat16)).astype(jnp.float32)), r)


def test_per_head_rms_norm():
    """Per-head q/k norm (Qwen3 / Cosmos / LTX-2 style): one RMSNorm(hd) on each head of a (..., H * hd) tensor."""
    heads, hd = 3, 16
    ref = torch.nn.RMSNorm(hd, eps=1e-6)
    _randomise(ref, 7)
    ours = norms.RMSNorm(hd, eps=1e-6, heads=heads)
    _set(ours.scale, _t(ref.weight))

    class PerHead(torch.nn.Module):
        def __init__(self, norm):
            super().__init__()
            self.norm = norm

        def forward(self, x):
            return self.norm(x.unflatten(-1, (heads, hd))).flatten(-2)

    _check(ours, PerHead(ref), _x((2, 5, heads * hd), 8))
    # across heads (Wan) is a different function
    across = norms.RMSNorm(heads * hd, eps=1e-6)
    x = jnp.asarray(_x((2, 5, heads * hd), 9))
    assert float(jnp.abs(across(x) - norms.RMSNorm(hd, eps=1e-6, heads=heads)(x)).max()) > 1e-3


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layer_norm_matches_torch(affine, bias):
    ref = torch.nn.LayerNorm(40, eps=1e-5, elementwise_affine=affine, bias=bias)
    if affine:
        _randomise(ref, 10)
    ours = norms.LayerNorm(40, eps=1e-5, affine=affine, bias=bias)
    if affine:
        _set(ours.scale, _t(ref.weight))
        if bias:
            _set(ours.bias, _t(ref.bias))
    assert (ours.bias is not None) == (affine and bias)
    _check(ours, ref, _x((2, 6, 40), 11, offset=5.0))  # offset: the mean subtraction matters


def test_layer_norm_dtypes():
    x = jnp.asarray(_x((2, 8), 12)).astype(jnp.bfloat16)
    assert norms.layer_norm(x, 1e-6).dtype == jnp.float32  # default: fp32 for the modulation that follows
    assert norms.layer_norm(x, 1e-6, out_dtype=None).dtype == jnp.bfloat16
    assert norms.rms_norm(x, eps=1e-6).dtype == jnp.bfloat16
    assert norms.LayerNorm(8, eps=1e-6, out_dtype=jnp.bfloat16)(x).dtype == jnp.bfloat16


def test_diffusers_fp32_layer_norm_bf16():
    """diffusers FP32LayerNorm on bf16 input: fp32 statistics, output cast back; ours with out_dtype=None."""
    from diffusers.models.normalization import FP32LayerNorm

    ref = FP32LayerNorm(32, eps=1e-6, elementwise_affine=True)
    _randomise(ref, 13)
    x = torch.from_numpy(_x((3, 32), 14)).to(torch.bfloat16)
    with torch.no_grad():
        r = ref(x)
    ours = norms.LayerNorm(32, eps=1e-6, out_dtype=None)
    _set(ours.scale, _t(ref.weight))
    _set(ours.bias, _t(ref.bias))
    out = ours(jnp.asarray(x.float().numpy()).astype(jnp.bfloat16))
    assert out.dtype == jnp.bfloat16 and r.dtype == torch.bfloat16
    # both round the same fp32 value once to bf16; they may differ by at most one bf16 ulp where fp32 noise sits on
    # a rounding boundary
    d = np.abs(np.asarray(out.astype(jnp.float32)) - r.float().numpy())
    ulp = np.abs(r.float().numpy()) * 2.0 ** -7
    assert (d <= ulp + 1e-30).all()
    assert (d == 0).mean() > 0.95


def test_module_state_is_named_scale_bias():
    ln = norms.LayerNorm(4, eps=1e-6)
    names = {"/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(ln))}
    assert names == {"scale", "bias"}
