"""Loading a VAE from its checkpoint tensors, with or without its encoder.

Every family's VAE is built the same way: shape-only, filled through its key table, every missing, unexpected or
mis-shaped tensor reported at once. Decode-only runs (text-to-video) build the decoder alone, use the decoder's
table and drop the encoder's tensors (``decode_only_ignore``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from flax import nnx

from vidax_core.io.convert import KeyRule
from vidax_core.io.load import load_model


def load_vae(make: Callable[[bool], nnx.Module], tensors: Mapping[str, Any], *, with_encoder: bool,
             rules: Sequence[KeyRule], decoder_rules: Sequence[KeyRule], decode_only_ignore: Sequence[str] = (),
             ignore: Sequence[str] = (), component: str = "vae", put=None) -> nnx.Module:
    """``make(with_encoder)`` filled from ``tensors`` (key -> array or zero-arg loader): by ``rules`` (ignoring
    ``ignore``) with the encoder, by ``decoder_rules`` (ignoring ``ignore`` and ``decode_only_ignore``) without."""
    return load_model(lambda: make(with_encoder), tensors, rules if with_encoder else decoder_rules,
                      component=component, put=put,
                      ignore=list(ignore) + ([] if with_encoder else list(decode_only_ignore)))
