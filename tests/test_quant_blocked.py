"""At-load quantization works a row block at a time: the same 8-bit values and scales as quantizing the
whole tensor at once, without a float32 copy of the whole tensor."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from vidax_core.quant import modes
from vidax_core.report import memory


@pytest.mark.parametrize("mode", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("shape,axes", [((3000, 2000), ()), ((4, 1500, 2000), (0,)), ((2101, 4099), ())])
def test_blocks_give_the_whole_tensor_values(mode, shape, axes, monkeypatch):
    w = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    w[..., 5, :] = 0.0  # an all-zero row and column keep scale 1
    w[..., 7] = 0.0
    got_q, got_s = modes.quantize(w, mode, axes)
    monkeypatch.setattr(modes, "BLOCK_ELEMENTS", 10**12)  # one pass over the whole tensor
    want_q, want_s = modes.quantize(w, mode, axes)
    np.testing.assert_array_equal(got_q.view(np.uint8), want_q.view(np.uint8))
    np.testing.assert_array_equal(got_s, want_s)


def test_no_float32_copy_of_the_whole_tensor():
    w = np.random.default_rng(1).standard_normal((8192, 8192), dtype=np.float32).astype(ml_dtypes.bfloat16)
    whole_f32 = w.size * 4 / 2**20  # 256 MiB: what one float32 copy would take
    with memory.window() as win:
        q, s = modes.quantize(w, "int8")
    print(f"quantizing a {w.nbytes / 2**20:.0f} MiB bf16 tensor grew the process by {win.growth_mb:.0f} MiB "
          f"(output {q.nbytes / 2**20:.0f} MiB; one float32 copy {whole_f32:.0f} MiB)")
    assert win.growth_mb < q.nbytes / 2**20 + 0.5 * whole_f32
