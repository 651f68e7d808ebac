"""Attention dispatch: every model calls :func:`attention` with (batch, seq, heads, head_dim) tensors.

The backend is chosen once per loaded model (``attention.backend`` in the config) and never changes silently: a
loaded pipe resolves it (:func:`resolve_backend`) and traces everything it runs inside :func:`scope`, so two pipes
in one process each keep their own. Backends (all (B, S, H, D), scale 1/sqrt(D), fp32 softmax):

* ``xla``        plain einsum; materialises the (B, H, Sq, Sk) fp32 logits. Any platform.
* ``blockwise``  pure-JAX online-softmax over (block_q, block_k) tiles with ``lax.scan``; memory linear in
  the sequence length. Any platform. (:mod:`vidax_core.attention.kernels.blockwise`)
* ``cudnn``      cuDNN fused attention via ``jax.nn.dot_product_attention``; CUDA GPU (compute capability
  >= 8.0), bf16/fp16 inputs only. (:mod:`vidax_core.attention.kernels.cudnn`)
* ``splash``     JAX's splash attention kernel with block sizes from a measured table and masks described tile by
  tile (skipped tiles cost nothing); TPU only (interpret mode for tests). NABLA's block-sparse attention and the
  3-D neighbourhoods run on it too. (:mod:`vidax_core.attention.kernels.splash_tpu`)
* ``pallas_tpu`` the Pallas TPU flash-attention kernel (fixed 512x512 blocks, head_dim padded to 128); TPU only
  (interpret mode for tests). (:mod:`vidax_core.attention.kernels.pallas_tpu`)

``auto`` resolves by platform: TPU -> ``splash`` (``pallas_tpu`` when splash cannot be imported); GPU -> ``cudnn``
when cuDNN fused attention is
usable, else ``xla``; CPU -> ``xla``; anything else -> ``xla``. On CPU ``xla`` loops over heads
(:mod:`vidax_core.attention.kernels.per_head`), the fastest exact layout there at test and encoder lengths
(2 cores, B=2, H=12, S=1280, D=128, fp32: 0.23 s against 0.63 s for ``blockwise``); it holds one head's
Sq*Sk fp32 logits at a time, so for sequences of tens of thousands of tokens set ``attention.backend=blockwise``
(memory linear in the sequence length). Under ``auto`` a call that cuDNN cannot take (fp32 inputs, odd
head_dim) runs on ``xla`` instead and says so once in the log; with ``attention.backend=cudnn`` the same call
raises :class:`UserError`. An explicit backend this platform cannot run raises :class:`UserError` at
:func:`set_backend` time: there is never a silent fallback.

Semantics shared by every backend (the original einsum implementation defines them): key j is visible to
query i iff ``kv_mask[b, j]`` (when given; ``kv_lengths[b]`` is the same as a right-padding ``kv_mask``) and
``q_segment_ids[b, i] == kv_segment_ids[b, j]`` (when given) and, under a causal mask, ``j <= i`` for the
causal rows: every row with ``causal=True``, the first P rows with ``causal_prefix=P`` (the mixture-of-
transformers mask of Cosmos3 on ``[text; video]``: text attends causally to text only, video attends to
everything). The output is in ``v.dtype``; a query row that sees no key gets the mean of ``v`` over all keys.
Masks travel as these O(S) pieces (lengths, (B, S) masks and segment ids, a flag, a static prefix length);
``blockwise``, ``splash`` and ``pallas_tpu`` build mask tiles per block and never hold an (Sq, Sk) array, ``cudnn`` uses
its padding and causal masks (a dense mask only for segment ids and for a causal mask combined with
``kv_mask``, logged), and ``xla`` holds (Sq, Sk) logits by design.

Each call site records the backend it ran, into the record of the active :func:`scope` (a pipe's own) or else the
process-wide one (:func:`calls`, cleared by :func:`set_backend`): the run metrics and ``vidax bench`` report it as
``attention_calls``.

Outside any scope, until :func:`set_backend` is called, the process uses ``xla`` (the original behaviour, so code
that calls models directly, e.g. tests and converters, is unaffected). The backend is read when a function is
traced: choose it before jit-compiling anything that calls :func:`attention`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from typing import Callable, Iterator

import jax
import jax.numpy as jnp

from vidax_core.attention.kernels import _common, blockwise
from vidax_core.attention.kernels import cudnn as _cudnn
from vidax_core.attention.kernels import pallas_tpu as _pallas_tpu
from vidax_core.attention.kernels import per_head as _per_head
from vidax_core.attention.kernels import splash_tpu as _splash
from vidax_core.attention.backends import ATTENTION_BACKENDS
from vidax_core.errors import UserError

log = logging.getLogger("vidax.attention")

BACKENDS = tuple(b for b in ATTENTION_BACKENDS if b != "auto")  # concrete: xla, cudnn, splash, pallas_tpu, blockwise
DEFAULT_BACKEND = "xla"

_requested = DEFAULT_BACKEND  # what the config asked for ("auto" or a concrete name)
_resolved = DEFAULT_BACKEND  # the concrete backend attention() runs
_fallbacks_logged: set[str] = set()
_calls: dict[str, dict] = {}  # call site -> what ran there (filled while tracing; see calls())
# (requested, resolved, call record) of the scope a loaded pipe runs in; None: the process-wide state above
_scoped: contextvars.ContextVar[tuple[str, str, dict] | None] = contextvars.ContextVar("vidax_attention",
                                                                                       default=None)


@contextlib.contextmanager
def scope(requested: str, resolved: str, record: dict) -> Iterator[str]:
    """Within the block, :func:`attention` runs ``resolved`` (the concrete backend of config value ``requested``)
    and call sites are recorded into ``record``, whatever the process-wide backend is: a loaded pipe runs and
    traces every call inside its own scope."""
    token = _scoped.set((requested, resolved, record))
    try:
        yield resolved
    finally:
        _scoped.reset(token)


def _state() -> tuple[str, str, dict]:
    active = _scoped.get()
    return active if active is not None else (_requested, _resolved, _calls)


# Frames skipped when naming a call site: the dispatch itself and the shared attention block every DiT calls.
_SITE_SKIP = ("vidax_core.attention", "vidax_core.nn.attention_block")


def _call_site() -> str:
    """``module:function:line`` of the first caller outside the attention package and the shared attention block
    (the model's own attention)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_SITE_SKIP):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_code.co_name}:{frame.f_lineno}"


def _record(backend: str, q: jax.Array, k: jax.Array, **extra) -> tuple[dict, str]:
    """Note what ran at the caller's call site; ``extra``: kernel details (``tiles``). Returns (the record, the
    site), where a sparse call adds its density (:mod:`vidax_core.attention.sparsity`)."""
    records, site = _state()[2], _call_site()
    records[site] = {"backend": backend, "q_len": int(q.shape[1]), "kv_len": int(k.shape[1]),
                     "heads": int(q.shape[2]), "head_dim": int(q.shape[3]), "dtype": str(q.dtype), **extra}
    return records, site


def calls() -> dict[str, dict]:
    """The backend each attention call site ran since the last :func:`set_backend`: ``{"module:function:line":
    {backend, q_len, kv_len, heads, head_dim, dtype[, tiles][, sparse, density]}}`` (local shapes, as the backend
    saw them; ``tiles``: the splash kernel's block sizes; ``sparse`` / ``density``: a sparse attention's kind and
    the share of the dense work its kernel does, :mod:`vidax_core.attention.sparsity`). Recorded when the call is
    traced, so a program reused from JAX's cache adds nothing (a measured density still grows as it runs)."""
    return {k: dict(v) for k, v in _calls.items()}


def xla_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    causal: bool = False,
    causal_prefix: int | None = None,
) -> jax.Array:
    """The XLA backend: fp32 logits masked with ``finfo(float32).min``, fp32 softmax.

    On CPU it loops over heads (:mod:`attention_kernels.per_head`, same numerics, several times faster there);
    elsewhere it is one (B, H, Sq, Sk) einsum, which GPU and TPU compilers fuse well.
    """
    kw = dict(kv_mask=kv_mask, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids, causal=causal,
              causal_prefix=causal_prefix)
    return (_per_head.attention if jax.default_backend() == "cpu" else einsum_attention)(q, k, v, **kw)


def einsum_attention(
    q, k, v, *, kv_mask=None, q_segment_ids=None, kv_segment_ids=None, causal=False, causal_prefix=None
) -> jax.Array:
    """One (B, H, Sq, Sk) einsum: fp32 logits and softmax (the XLA backend on GPU and TPU)."""
    limit = _common.causal_limit(q.shape[1], k.shape[1], causal, causal_prefix)
    scale = 1.0 / jnp.sqrt(jnp.asarray(q.shape[-1], jnp.float32))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    vis = _common.visible(kv_mask, q_segment_ids, kv_segment_ids, q.shape[0], q.shape[1], k.shape[1], limit)
    if vis is not None:
        logits = jnp.where(vis, logits, _common.MASKED_LOGIT)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


IMPLEMENTATIONS: dict[str, Callable[..., jax.Array]] = {
    "xla": xla_attention,
    "blockwise": blockwise.attention,
    "cudnn": _cudnn.attention,
    "splash": _splash.attention,
    "pallas_tpu": _pallas_tpu.attention,
}


def _unavailable(name: str, platform: str) -> str | None:
    """None when backend ``name`` can run on ``platform``, else a one-line reason."""
    if name in ("xla", "blockwise"):
        return None
    if name == "cudnn":
        if platform != "gpu":
            return f"attention.backend=cudnn needs a CUDA GPU; this process runs on {platform}: use auto or xla"
        why = _cudnn.usable()
        return None if why is None else f"attention.backend=cudnn cannot run here: {why}: use auto or xla"
    if name in ("pallas_tpu", "splash"):
        if platform != "tpu":
            return f"attention.backend={name} needs a TPU; this process runs on {platform}: use auto or xla"
        why = (_pallas_tpu if name == "pallas_tpu" else _splash).import_error()
        return None if why is None else f"attention.backend={name} cannot run here: {why}: use auto or xla"
    raise AssertionError(name)


def resolve_backend(name: str, platform: str | None = None) -> str:
    """The concrete backend for config value ``name`` on ``platform`` (default: ``jax.default_backend()``).

    Logs the choice (logger ``vidax.attention``, INFO). Raises :class:`UserError` for an unknown name or an
    explicit backend that cannot run on this platform.
    """
    platform = jax.default_backend() if platform is None else platform
    if name not in ATTENTION_BACKENDS:
        raise UserError(f"attention.backend={name} is not one of {', '.join(ATTENTION_BACKENDS)}")
    if name != "auto":
        why = _unavailable(name, platform)
        if why is not None:
            raise UserError(why)
        log.info("attention backend: %s (platform %s)", name, platform)
        return name
    if platform == "tpu":
        why, why_flash = _splash.import_error(), _pallas_tpu.import_error()
        if why is None:
            choice, reason = "splash", "TPU"
        else:
            choice, reason = ("pallas_tpu", f"TPU, but {why}") if why_flash is None else ("xla", f"TPU, but {why}")
    elif platform == "gpu":
        why = _cudnn.usable()
        choice, reason = ("cudnn", "cuDNN fused attention usable") if why is None else ("xla", f"no cuDNN: {why}")
    elif platform == "cpu":
        choice, reason = "xla", ("CPU: exact attention one head at a time, the fastest layout there; "
                                 "set attention.backend=blockwise for sequences of tens of thousands of tokens")
    else:
        choice, reason = "xla", f"no specialised backend for platform {platform}"
    log.info("attention backend: auto -> %s (%s)", choice, reason)
    return choice


def set_backend(name: str) -> str:
    """Make ``name`` (a config value: auto | xla | cudnn | splash | pallas_tpu | blockwise) the process-wide backend.

    Returns the concrete backend; raises :class:`UserError` if it cannot run here (the previous backend stays).
    """
    global _requested, _resolved
    resolved = resolve_backend(name)
    _requested, _resolved = name, resolved
    _calls.clear()
    return resolved


def get_backend() -> str:
    """The concrete backend :func:`attention` currently runs (the active scope's, else the process-wide one)."""
    return _state()[1]


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """``with use_backend("blockwise"):`` set the backend for the block, restore the previous one after."""
    global _requested, _resolved
    previous = (_requested, _resolved)
    resolved = set_backend(name)
    try:
        yield resolved
    finally:
        _requested, _resolved = previous


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    kv_lengths: jax.Array | None = None,
    causal: bool = False,
    causal_prefix: int | None = None,
    causal_block: int | None = None,
    key_limits: tuple[tuple[int, int], ...] | None = None,
) -> jax.Array:
    """Softmax attention over (B, S, H, D) inputs, scale 1/sqrt(D), softmax in fp32, on the current backend.

    ``kv_mask``: optional (B, Sk) boolean, True where the key is valid. ``kv_lengths``: optional (B,) integer
    count of valid keys (right padding; combined with ``kv_mask`` when both are given).
    ``q_segment_ids``/``kv_segment_ids``: optional (B, Sq)/(B, Sk) integer ids (pass both); a query only sees
    keys with its id. ``causal``: query i sees keys j <= i. ``causal_prefix=P`` (static int): the first P rows are
    causal (and so see only the first P keys), later rows see every key: the mixture-of-transformers mask on a
    ``[P text tokens; video tokens]`` sequence. ``causal_block=T`` (static int): block-causal, query i sees keys
    j with ``j // T <= i // T`` (SkyReels-V2's causal frame blocks); it runs as one unmasked call per block of T
    queries over the keys up to that block's end, on any backend, with no (Sq, Sk) mask. Causal masks need
    Sq == Sk. ``key_limits`` (static): runs ``(rows, keys)`` covering the queries in order, the rows of a run seeing
    the first ``keys`` keys only (a chunk-causal mask over a cached prefix, :mod:`vidax_core.causal`); the
    ``splash`` backend runs it as one kernel call whose tiles past a row's limit are skipped, every other backend as
    one unmasked call per run over its visible keys, so no masked block is computed anywhere. Returns (B, Sq, H, D)
    in ``v.dtype``.
    """
    if key_limits is not None:
        return _key_limited(q, k, v, tuple((int(r), int(n)) for r, n in key_limits), kv_mask=kv_mask,
                            q_segment_ids=q_segment_ids, kv_lengths=kv_lengths, causal=causal,
                            causal_prefix=causal_prefix, causal_block=causal_block)
    if causal_block is not None:
        return _block_causal(q, k, v, int(causal_block), kv_mask=kv_mask, q_segment_ids=q_segment_ids,
                             kv_segment_ids=kv_segment_ids, kv_lengths=kv_lengths, causal=causal,
                             causal_prefix=causal_prefix)
    _common.check_inputs(q, k, v, kv_mask, q_segment_ids, kv_segment_ids)
    _common.causal_limit(q.shape[1], k.shape[1], causal, causal_prefix)  # argument errors before dispatch
    if kv_lengths is not None:
        if tuple(jnp.shape(kv_lengths)) != (q.shape[0],):
            raise ValueError(f"kv_lengths must be (B,) = {(q.shape[0],)}; got {tuple(jnp.shape(kv_lengths))}")
        kv_mask = _common.lengths_to_mask(kv_lengths, k.shape[1], kv_mask)
    requested, backend, _ = _state()
    if backend == "cudnn":
        why, fallback = _cudnn.unsupported(q), "xla"
        if why is None:
            why, fallback = _cudnn.dense_mask_reason(q, k, kv_mask, q_segment_ids, causal, causal_prefix), "blockwise"
        if why is not None:
            if requested == "cudnn":
                raise UserError(f"attention.backend=cudnn cannot take this call: {why}: use auto or {fallback}")
            if why not in _fallbacks_logged:
                _fallbacks_logged.add(why)
                log.info("attention backend: auto chose cudnn, but %s: using %s for such calls", why, fallback)
            backend = fallback
    kw = dict(kv_mask=kv_mask, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids)
    if causal or causal_prefix is not None:  # only then, so that a backend without these keywords still runs
        kw.update(causal=causal, causal_prefix=causal_prefix)
    _record(backend, q, k, **({"tiles": _splash.describe(q.shape, k.shape, q.dtype)} if backend == "splash" else {}))
    return IMPLEMENTATIONS[backend](q, k, v, **kw)


def _block_causal(q: jax.Array, k: jax.Array, v: jax.Array, block: int, *, kv_mask, q_segment_ids, kv_segment_ids,
                  kv_lengths, causal, causal_prefix) -> jax.Array:
    """:func:`attention` with ``causal_block=block``: the queries of block b attend, unmasked, to the keys of blocks
    0..b (a static prefix of the keys), one call per block; the outputs are joined on the sequence axis."""
    if causal or causal_prefix is not None or q_segment_ids is not None or kv_segment_ids is not None:
        raise ValueError("causal_block does not combine with causal, causal_prefix or segment ids")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"causal_block needs Sq == Sk; got {q.shape[1]} and {k.shape[1]}")
    if block < 1:
        raise ValueError(f"causal_block must be a positive token count, got {block}")
    if kv_lengths is not None:
        kv_mask = _common.lengths_to_mask(kv_lengths, k.shape[1], kv_mask)
    outs = []
    for start in range(0, q.shape[1], block):
        end = min(start + block, q.shape[1])
        mask = None if kv_mask is None else kv_mask[:, :end]
        outs.append(attention(q[:, start:end], k[:, :end], v[:, :end], kv_mask=mask))
    return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)


def _key_limited(q: jax.Array, k: jax.Array, v: jax.Array, runs: tuple[tuple[int, int], ...], *, kv_mask,
                 q_segment_ids, kv_lengths, causal, causal_prefix, causal_block) -> jax.Array:
    """:func:`attention` with ``key_limits=runs``: each run of query rows sees a prefix of the keys."""
    if (kv_mask is not None or q_segment_ids is not None or kv_lengths is not None or causal
            or causal_prefix is not None or causal_block is not None):
        raise ValueError("key_limits does not combine with other masks")
    if sum(r for r, _ in runs) != q.shape[1] or any(r < 0 or not 0 < n <= k.shape[1] for r, n in runs):
        raise ValueError(f"key_limits {runs} must cover the {q.shape[1]} queries with limits in [1, {k.shape[1]}]")
    runs = tuple(rn for rn in runs if rn[0])
    _common.check_inputs(q, k, v, None, None, None)
    if _state()[1] == "splash":
        _record("splash", q, k, tiles=_splash.describe(q.shape, k.shape, q.dtype))
        return _splash.limited_attention(q, k, v, runs)
    outs, start = [], 0
    for rows, keys in runs:
        outs.append(attention(q[:, start:start + rows], k[:, :keys], v[:, :keys]))
        start += rows
    return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)
