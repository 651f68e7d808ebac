"""KeyRule's layer offset: one checkpoint block list split over two stacked groups."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core import KeyRule, convert
from vidax_core.io.convert import ConversionError


class Leaf:
    def __init__(self, *shape):
        self.shape, self.dtype = shape, np.float32


RULES = [  # source blocks 0..1 fill "double" layers 0..1, blocks 2..4 fill "single" layers 0..2
    KeyRule(r"blocks\.(\d+)\.w", "single/w", layer_group=1, layer_offset=2),
    KeyRule(r"blocks\.(\d+)\.w", "double/w", layer_group=1),
]


def test_offset_rule_fills_the_second_stack_from_layer_zero():
    tensors = {f"blocks.{i}.w": np.full((3,), float(i), np.float32) for i in range(5)}
    out = convert(tensors, RULES, {("double", "w"): Leaf(2, 3), ("single", "w"): Leaf(3, 3)})
    np.testing.assert_array_equal(out[("double", "w")][:, 0], [0.0, 1.0])
    np.testing.assert_array_equal(out[("single", "w")][:, 0], [2.0, 3.0, 4.0])


def test_offset_rule_does_not_match_below_its_offset():
    assert RULES[0].match("blocks.1.w") is None
    assert RULES[0].match("blocks.2.w") == (("single", "w"), 0)


def test_a_block_past_both_stacks_is_reported():
    tensors = {f"blocks.{i}.w": np.zeros((3,), np.float32) for i in range(6)}
    with pytest.raises(ConversionError, match=r"blocks\.5\.w .*layer 3 of 3"):
        convert(tensors, RULES, {("double", "w"): Leaf(2, 3), ("single", "w"): Leaf(3, 3)})
