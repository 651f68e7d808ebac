"""Attention backend implementations behind :func:`vidax_core.attention.attention`.

Every backend takes ``(q, k, v, *, kv_mask=None, q_segment_ids=None, kv_segment_ids=None, causal=False,
causal_prefix=None)`` in (B, S, H, D) layout and returns (B, Sq, H, D) in ``v.dtype``;
see :mod:`vidax_core.attention` for the
shared semantics. Import the modules directly (``attention_kernels.blockwise`` ...); ``pallas_tpu`` and
``cudnn`` import their JAX pieces lazily so that importing this package never fails on any platform.
"""
