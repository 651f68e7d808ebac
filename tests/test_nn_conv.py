"""Core channel-last 1-D/2-D convolutions, SnakeBeta and anti-aliased resampling (vidax_core.nn.conv, .snake,
.antialias) against torch / diffusers' vocoder pieces, each on the cases the audio models use and one beyond.

Tolerance: 8 x the reference's own fp32 error (torch fp32 vs float64 on the same inputs), never below 1e-6 of the
output's size.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402

from vidax_core.io.convert import conv as conv_kernel, conv_transpose  # noqa: E402
from vidax_core.nn.antialias import DownSample1d, UpSample1d  # noqa: E402
from vidax_core.nn.conv import Conv, ConvTranspose1d, same_padding  # noqa: E402
from vidax_core.nn.snake import SnakeBeta  # noqa: E402
from vidax_core.testing.parity import max_abs  # noqa: E402

pytestmark = pytest.mark.xdist_group("nn_conv")


def _both(module, x):
    """The torch module's output on channel-first ``x`` in float32 and float64, channel-last."""
    with torch.no_grad():
        r32 = module(torch.from_numpy(x)).numpy()
        r64 = module.double()(torch.from_numpy(x).double()).numpy()
    return np.moveaxis(r32, 1, -1), np.moveaxis(r64, 1, -1)


def _check(got, r32, r64):
    bound = max(8 * max_abs(r32, r64), 1e-6 * float(np.abs(r64).max()))
    assert np.asarray(got).shape == r64.shape
    assert max_abs(got, r64) <= bound, (max_abs(got, r64), bound)


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("k,dilation,groups", [(3, 1, 1), (5, 3, 1), (4, 2, 2)])
def test_conv1d_same_padding_matches_torch(k, dilation, groups):
    ref = torch.nn.Conv1d(4, 6, k, dilation=dilation, groups=groups, padding="same")
    x = _x((2, 4, 11))
    r32, r64 = _both(ref, x)
    conv = Conv(4, 6, (k,), padding=(same_padding(k, dilation),), dilation=dilation, groups=groups)
    conv.kernel[...] = conv_kernel(ref.weight.detach().float().numpy())
    conv.bias[...] = ref.bias.detach().float().numpy()
    _check(conv(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)


def test_conv2d_asymmetric_padding_and_stride():
    """A causal (front-padded) 3x3 conv and a stride-2 one, as torch's ``F.pad`` then a padding-free conv."""
    x = _x((1, 3, 7, 6), seed=1)
    for pads, stride in ((((2, 0), (1, 1)), 1), (((2, 0), (0, 1)), 2)):
        ref = torch.nn.Conv2d(3, 5, 3, stride=stride)
        xt = torch.nn.functional.pad(torch.from_numpy(x), (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
        r32, r64 = _both(ref, xt.numpy())
        conv = Conv(3, 5, (3, 3), stride=stride, padding=pads)
        conv.kernel[...] = conv_kernel(ref.weight.detach().float().numpy())
        conv.bias[...] = ref.bias.detach().float().numpy()
        _check(conv(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)


@pytest.mark.parametrize("k,stride,padding,output_padding", [(16, 6, 5, 0), (15, 5, 5, 0), (4, 2, 1, 1)])
def test_conv_transpose1d_matches_torch(k, stride, padding, output_padding):
    ref = torch.nn.ConvTranspose1d(6, 3, k, stride=stride, padding=padding, output_padding=output_padding)
    x = _x((2, 6, 7), seed=2)
    r32, r64 = _both(ref, x)
    up = ConvTranspose1d(6, 3, k, stride=stride, padding=padding, output_padding=output_padding)
    up.kernel[...] = conv_transpose(ref.weight.detach().float().numpy())
    up.bias[...] = ref.bias.detach().float().numpy()
    _check(up(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)


@pytest.mark.parametrize("use_beta", [True, False])
def test_snake_beta_matches_diffusers(use_beta):
    from diffusers.pipelines.ltx2.vocoder import SnakeBeta as RefSnake

    ref = RefSnake(5, use_beta=use_beta)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(0.3 * torch.randn(p.shape))
    x = 3 * _x((2, 5, 9), seed=3)
    r32, r64 = _both(ref, x)
    act = SnakeBeta(5, use_beta=use_beta)
    act.alpha[...] = ref.alpha.detach().float().numpy()
    if use_beta:
        act.beta[...] = ref.beta.detach().float().numpy()
    _check(act(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)


@pytest.mark.parametrize("ratio,kernel,window", [(2, 12, "kaiser"), (3, None, "kaiser"), (3, None, "hann")])
def test_resamplers_match_diffusers(ratio, kernel, window):
    """The up- and downsamplers, their computed taps included (the upsampler's polyphase form against the
    reference's transposed conv)."""
    from diffusers.pipelines.ltx2.vocoder import DownSample1d as RefDown, UpSample1d as RefUp

    x = _x((2, 4, 13), seed=4)
    ref_up = RefUp(ratio, kernel, window_type=window)
    up = UpSample1d(ratio, kernel, window=window, persistent=window == "kaiser")
    taps = np.asarray(up.filter[...] if up.filter is not None else up.static_taps)
    np.testing.assert_allclose(taps, ref_up.filter.numpy().reshape(-1), rtol=0, atol=1e-7)
    ref_up.filter = ref_up.filter.double()  # the float64 run on the same taps
    r32, r64 = _both(ref_up, x)
    _check(up(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)
    if window == "kaiser":
        ref_down = RefDown(ratio, kernel)
        down = DownSample1d(ratio, kernel)
        np.testing.assert_allclose(np.asarray(down.filter[...]), ref_down.filter.numpy().reshape(-1), atol=1e-7)
        r32, r64 = _both(ref_down, x)
        _check(down(jnp.asarray(np.moveaxis(x, 1, -1))), r32, r64)
