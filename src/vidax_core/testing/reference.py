"""Helpers around the PyTorch reference (needs the ``test`` extra: torch, diffusers, transformers).

* :func:`reference_outputs` — a reference pipeline's final latents and frames from given initial latents;
  :func:`write_test_image` — the conditioning image of the image-to-video end-to-end tests.
* :func:`randomize_` (and :func:`randomize_scaled_`, fan-in scaled for deep VAEs)
  — every parameter of a reference module drawn from a seeded normal (norm gains around 1), so
  no term of a parity check is trivially zero; :func:`save_pipeline` writes a pipeline as a checkpoint folder.
* :func:`meta_tensors` and :func:`check_full_size` — a model's full published architecture checked without weights:
  the reference module built on the meta device gives key -> shape, zero-stride stand-ins carry the shapes, and the
  vidax conversion must fill the full-size ``eval_shape`` tree exactly, with as many parameters as the reference;
  :func:`registered_models` lists the ids a family's full-size test must cover.

torch is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np


def randomize_(module, seed: int, std: float = 0.1) -> None:
    """Overwrite every parameter of a torch module with seeded normal noise (norm gains around 1)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * std
            is_gain = p.ndim <= 1 and ("norm" in name or name.endswith("gamma")) and "bias" not in name
            p.copy_((1.0 + noise) if is_gain else noise)


def randomize_scaled_(module) -> None:
    """Overwrite every parameter of a torch module from torch's global generator so activations stay O(1) through
    deep conv stacks: 1-D ``weight`` gains ``1 + 0.1 n``, biases ``0.1 n``, other weights ``n / sqrt(fan_in)``
    (seed the generator before building the module: its own init draws come first)."""
    import torch

    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim == 1 and name.endswith("weight"):  # norm gains
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p[0].numel() ** 0.5)


def timestep_embedding_f64(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                           max_period=10000):
    """diffusers' ``get_timestep_embedding`` carried out in float64 (the library computes it in float32 whatever the
    model's dtype: at a timestep near 1000 one float32 ulp of a frequency is ~1e-5 rad of phase)."""
    import torch

    half = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float64) / (half - downscale_freq_shift)
    emb = scale * timesteps[:, None].double() * torch.exp(exponent)[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half:], emb[:, :half]], dim=-1)
    return emb


@contextmanager
def reference_in(module, dtype) -> Iterator[Any]:
    """The reference ``module`` cast to ``dtype`` (a torch dtype) under ``no_grad``; in float64 diffusers' timestep
    sinusoid is float64 too (:func:`timestep_embedding_f64`), so the float64 run is a true oracle. The module is
    float32 again, and the sinusoid diffusers' own, on the way out."""
    import diffusers.models.embeddings as emb
    import torch

    saved = emb.get_timestep_embedding
    if dtype == torch.float64:
        emb.get_timestep_embedding = timestep_embedding_f64
    try:
        with torch.no_grad():
            yield module.to(dtype)
    finally:
        emb.get_timestep_embedding = saved
        module.to(torch.float32)


@contextmanager
def block_masked_flex(module, block: int = 64) -> Iterator[None]:
    """``module.dispatch_attention_fn`` (a diffusers model file that hands a flex-attention ``BlockMask`` to it, as
    the Kandinsky NABLA models do) attending over the kept (query block, key block) pairs only, as the compiled flex
    kernel does: on CPU without ``torch.compile`` flex attention's eager fallback ignores the block structure and
    attends densely, so the reference's own call would be dense attention."""
    import torch.nn.functional as F

    dispatch = module.dispatch_attention_fn

    def masked(query, key, value, attn_mask=None, **kw):
        if attn_mask is None or not hasattr(attn_mask, "to_dense"):
            return dispatch(query, key, value, attn_mask=attn_mask, **kw)
        keep = attn_mask.to_dense().bool().repeat_interleave(block, -2).repeat_interleave(block, -1)
        t = lambda a: a.transpose(1, 2)  # noqa: E731
        return t(F.scaled_dot_product_attention(t(query), t(key), t(value), attn_mask=keep))

    module.dispatch_attention_fn = masked
    try:
        yield
    finally:
        module.dispatch_attention_fn = dispatch


def state_arrays(module) -> dict[str, np.ndarray]:
    """A torch module's state dict as numpy arrays under diffusers' names: the tensors a vidax loader converts."""
    return {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}


def reference_fixture(build: Callable[..., Any], **kwargs: Any):
    """A module-scoped pytest fixture giving ``(module, state_arrays(module))`` for the reference ``build(**kwargs)``
    (``reference = reference_fixture(random_ltx_dit, seed=0)`` at a test module's top level)."""
    import pytest

    @pytest.fixture(scope="module")
    def reference():
        module = build(**kwargs)
        return module, state_arrays(module)

    return reference


def save_pipeline(pipe, folder: str | os.PathLike) -> Path:
    """``save_pretrained`` a diffusers pipeline (safetensors) into ``folder``: a checkpoint vidax loads as a user's."""
    pipe.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)


def write_test_image(path: str | os.PathLike, *, seed: int = 1, size: tuple[int, int] = (40, 56)) -> Path:
    """A small random RGB PNG (``size`` = (height, width)) whose top half is darker and lifted, so resizing and
    cropping change it: the conditioning image of the image-to-video end-to-end tests."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = (rng.random((*size, 3)) * 255).astype(np.uint8)
    pixels[: size[0] // 2] = pixels[: size[0] // 2] // 2 + 100
    Image.fromarray(pixels).save(path)
    return Path(path)


def reference_outputs(pipe, noise: np.ndarray, *, final_latents: str = "callback",
                      **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """A diffusers pipeline run from the given initial latents ``noise`` (its ``latents=``) with ``kwargs``: its final
    latents and its decoded frames (``output_type="np"``), both float32 numpy.

    ``final_latents="callback"`` takes the latents of the last step's ``callback_on_step_end`` (one run);
    ``"output"`` runs the pipeline again with ``output_type="latent"`` (the latents as it hands them to its VAE,
    after any substitution it makes past the loop, such as Wan2.2 TI2V's first frame)."""
    import torch

    seen: dict[str, Any] = {}

    def grab(p, i, t, kw):
        seen["latents"] = kw["latents"].detach().clone()
        return {}

    if final_latents == "callback":
        kwargs["callback_on_step_end"] = grab
    elif final_latents == "output":
        seen["latents"] = pipe(latents=torch.from_numpy(noise), output_type="latent", **kwargs).frames
    else:
        raise ValueError(f"final_latents must be 'callback' or 'output', got {final_latents!r}")
    frames = pipe(latents=torch.from_numpy(noise), output_type="np", **kwargs).frames
    return np.asarray(seen["latents"], np.float32), np.asarray(frames, np.float32)


def torch_param_bytes(module) -> int:
    """Bytes of a torch module's parameters at fp32 (the reference's own count)."""
    return sum(int(p.numel()) for p in module.parameters()) * 4


class MetaTensors(dict):
    """key -> zero-stride float32 stand-in of the reference tensor's shape (no memory), with ``shape(key)`` as the
    core's lazy checkpoint readers have; ``aliases`` are the keys of tied parameters after their first name (T5's
    ``encoder.embed_tokens.weight`` is ``shared.weight``), which a parameter count takes once."""

    aliases: frozenset = frozenset()

    def shape(self, key):
        return self[key].shape


def meta_tensors(build: Callable[[], Any] | Any) -> MetaTensors:
    """The state dict of a reference module as stand-ins; ``build`` is called under ``torch.device("meta")`` (or is
    a module already built there)."""
    import torch

    if callable(build) and not isinstance(build, torch.nn.Module):
        with torch.device("meta"):
            build = build()
    zero = np.zeros((), np.float32)
    out = MetaTensors({k: np.broadcast_to(zero, tuple(v.shape)) for k, v in build.state_dict().items()})
    names = {k for k, _ in build.named_parameters(remove_duplicate=False)}
    out.aliases = frozenset(names - {k for k, _ in build.named_parameters()})
    return out


@dataclass(frozen=True)
class FullSize:
    reference_tensors: int
    vidax_leaves: int
    reference_params: int
    vidax_params: int
    tensors: Any = field(default=None, repr=False, compare=False)  # the stand-ins checked
    flat: Any = field(default=None, repr=False, compare=False)  # the vidax eval_shape tree, path -> leaf
    dropped: tuple[str, ...] = field(default=(), repr=False, compare=False)  # reference keys matched by ``ignore``


def check_full_size(tensors: Any, rules: Any, ctor: Callable[[], Any], *, component: str = "transformer",
                    ignore: Iterable[str] = (), label: str = "",
                    params: tuple[float, float] | None = None) -> FullSize:
    """A published architecture checked without weights: convert the stand-ins onto the ``eval_shape`` tree of
    ``ctor()`` (check only: every missing, unexpected or mis-shaped key raises) and assert that both sides count the
    same parameters (keys matched by the ``ignore`` regexes and tied aliases left out of the reference's count)
    and, with ``params=(lo, hi)``, that the count lies strictly between the published bounds.

    ``tensors`` is a dict of stand-ins, or the reference module (or a zero-argument builder of it, called on the
    meta device) whose :func:`meta_tensors` are taken; ``rules`` is a KeyRule table, or a function
    ``fill(tensors, flat)`` for a family whose conversion is code (it must convert check-only). Returns the counts,
    the stand-ins, the vidax tree and the dropped keys for the caller's own assertions."""
    import re

    from vidax_core.io.convert import convert
    from vidax_core.nn.state import abstract_model

    if not isinstance(tensors, dict):
        tensors = meta_tensors(tensors)
    ignore = list(ignore)
    _, _, flat = abstract_model(ctor)
    if callable(rules):
        rules(tensors, flat)
    else:
        convert(tensors, rules, flat, component=component, ignore=ignore, check_only=True)
    dropped = tuple(k for k in tensors if any(re.fullmatch(p, k) for p in ignore))
    uncounted = set(dropped) | set(getattr(tensors, "aliases", ()))
    n_ref = sum(int(np.prod(v.shape)) for k, v in tensors.items() if k not in uncounted)
    out = FullSize(len(tensors), len(flat), n_ref, sum(int(np.prod(v.shape)) for v in flat.values()), tensors, flat,
                   dropped)
    print(f"{label or component}: {out.reference_tensors} reference tensors -> {out.vidax_leaves} vidax leaves, "
          f"{out.vidax_params / 1e9:.3f}B parameters")
    assert out.reference_params == out.vidax_params, (
        f"{label or component}: the reference has {out.reference_params} parameters, vidax {out.vidax_params}")
    if params is not None:
        lo, hi = params
        assert lo < out.vidax_params < hi, f"{label or component}: {out.vidax_params} parameters, not in ({lo}, {hi})"
    return out


def registered_models(family: str) -> set[str]:
    """The model ids the installed plugins register for ``family`` (a full-size test covers each of them)."""
    from vidax_core.plugins import get_plugins

    return {s.id for s in get_plugins().registry if s.family == family}

