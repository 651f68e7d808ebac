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


def vae_loader(vae_cls: Callable[..., nnx.Module], rules: Sequence[KeyRule], decoder_rules: Sequence[KeyRule], *,
               decode_only_ignore: Sequence[str] = (), ignore: Sequence[str] = (), doc: str = "") -> Callable:
    """A family's ``load_vae(cfg, tensors, *, with_encoder=True, put=None)`` for a VAE class built as
    ``vae_cls(cfg, with_encoder=...)``: :func:`load_vae` with the family's tables, ``doc`` as its docstring."""

    def load(cfg: Any, tensors: Mapping[str, Any], *, with_encoder: bool = True, put=None) -> nnx.Module:
        return load_vae(lambda enc: vae_cls(cfg, with_encoder=enc), tensors, with_encoder=with_encoder, rules=rules,
                        decoder_rules=decoder_rules, decode_only_ignore=decode_only_ignore, ignore=ignore, put=put)

    load.__name__ = load.__qualname__ = "load_vae"
    load.__doc__ = doc or vae_loader.__doc__
    return load
