"""A causal call's state kept for a continuation ("extend this video by N seconds"): its windowed sampling (the
family's history: the recent chunks' latents, positions), its KV cache on the devices and its VAE decode stream
(the causal decoder's caches, so the continuation's frames join the earlier ones seamlessly).

A loaded pipe keeps at most one session (:attr:`vidax_core.runner.loaded.LoadedModel.session`): the cache holds
device memory, so keeping a new one frees the old. A continuation runs the family's continuation windows
(:meth:`vidax_core.windows.WindowedSampling.extend`) over the kept cache, first writing the last window the kept
call left unwritten (:meth:`~vidax_core.windows.WindowedSampling.pending_fill`); it may change the prompt (the
kept chunks keep the keys they were made with) but not the guidance's branches (one cache row each).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from vidax_core.errors import UserError

_ids = itertools.count(1)


@dataclass
class CausalSession:
    """What a kept causal call leaves: ``ws`` (its windowed sampling), ``cache`` (its
    :class:`vidax_core.causal.run.CausalCache`), ``decoder`` (its VAE decode stream, None when the VAE has none),
    ``branches`` (the guidance branches, one cache row each) and ``frames`` (video frames made so far)."""

    ws: Any
    cache: Any
    decoder: Any
    branches: tuple[str, ...]
    frames: int = 0
    id: int = field(default_factory=lambda: next(_ids))
    closed: bool = False

    def continued(self, cfg: Any, guide: Any) -> Any:
        """The windowed sampling that continues this session's video as ``cfg`` asks (UserError when it cannot)."""
        if self.closed:
            raise UserError("this kept video was released (a later call kept another, or the pipe closed): continue "
                            "from its frames instead (video=...)")
        names = tuple(b.name for b in guide.branches)
        if names != self.branches:
            raise UserError(f"a continuation keeps the guidance of the video it continues ({len(self.branches)} "
                            f"branch(es): {', '.join(self.branches)}); this call asks for {', '.join(names)}: set "
                            "guidance_scale as the kept call had it")
        return self.ws.extend(cfg)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.cache is not None:
                self.cache.close()
            self.cache = self.decoder = self.ws = None
