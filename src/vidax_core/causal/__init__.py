"""Causal (chunk-by-chunk) generation: a video made chunk by chunk, each chunk attending to the keys and values
of the chunks before it, cached instead of recomputed.

* :mod:`.kv`: what a family caches (:class:`~.kv.CacheSpec`: segments of fixed capacity, so the cache's memory is
  bounded by the model's attention window) and how one model call reads and writes it (:class:`~.kv.View`);
* :mod:`.blocks`: the stacked blocks of a call over the cache (the carry that finds each layer's part, the
  self-attention over the cached prefix);
* :mod:`.run`: the cache of one call or continued session, and the cache-writing model call after each chunk
  (resident or with the blocks streamed from the host).

A chunked run (:mod:`vidax_core.windows`) whose family declares a cache (``WindowedSampling.cache``) gets one;
each window's steps read it (``WindowStart.cache_view``), each finished window writes its chunk into it
(``WindowDone.cache_fill``). The attention primitive is :func:`vidax_core.attention.ulysses.prefix_attention`
(``key_limits``: every backend computes only the visible blocks; the splash kernel skips the others' tiles).
"""
