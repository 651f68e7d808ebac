"""Checkpoints made of single files, one per component: a ComfyUI models folder or ``model.files``.

What most people who run these models locally already have is ComfyUI's layout: a ``models/`` folder (or a
Comfy-Org repackaged repo's ``split_files/``) with one file per part,

  diffusion_models/ (or unet/)     the denoiser, e.g. wan2.1_t2v_14B_fp8_e4m3fn.safetensors (two for Wan2.2 A14B)
  text_encoders/ (or clip/)        the prompt encoder, e.g. umt5_xxl_fp8_e4m3fn_scaled.safetensors
  vae/                             the VAE, e.g. wan_2.1_vae.safetensors
  clip_vision/                     an image encoder (Wan2.1 image-to-video: clip_vision_h.safetensors)
  checkpoints/                     all-in-one files (LTX-Video's ltxv-*.safetensors: denoiser and VAE; LTX-2.0's
                                   ltx-2-19b-dev.safetensors: every part but the prompt encoder)

or the same files named one by one (``model.files: {transformer: F, text_encoder: F, vae: F}``). Such a folder
holds many models; the files of the run's id are the ones its :attr:`ModelSpec.comfy_files` patterns match (the
names Comfy-Org publishes), or the only ``.safetensors`` file of a sub-folder; anything else is named with
``model.files``. Each file is read in the layout it was written in:

* the family's ``component_file`` hook renames a file in its original release's names (ComfyUI keeps those: Wan's
  ``blocks.N.self_attn.q``, its VAE's ``decoder.upsamples.N``) and reads its config from the tensor shapes;
* a file already in diffusers / transformers names (ComfyUI's text encoders: ``encoder.block.N...``,
  ``model.layers.N...``) is read as the diffusers component, its config the id's published one (the plugin's
  shipped layout), with a T5-family or decoder-LLM (Qwen, Gemma) encoder's sizes read from its tensors;
* wrapper prefixes (``model.diffusion_model.``, ``first_stage_model.``...) are removed; an 8-bit denoiser, and
  the Linear kernels of an 8-bit prompt encoder (ComfyUI ``scaled_fp8``, ``comfy_quant``, plain fp8: each weight
  with its scale, :class:`~vidax_core.quant.source.QuantizedTensors`), stay 8-bit as stored and are dequantised
  inside their matmuls in the run's compute dtype (:mod:`vidax_core.quant`, :mod:`vidax_core.quant.stored`); the
  encoder's other tensors are read in that dtype, and an 8-bit VAE file is dequantised on read;
* the tokenizer is ``model.files.tokenizer``, else the SentencePiece model ComfyUI's UMT5 / T5 / Gemma files
  carry (``spiece_model``; a Gemma's tokenizes as Gemma's), else the id's hub repo's ``tokenizer/`` folder (a few
  MB, fetched once); the scheduler and every other config are the published ones.

A component ``model.files`` leaves out is read from a named file whose name the id publishes for it too (an
all-in-one file: LTX's release files). A component the id needs that no file provides is named, with the others
missing, in one ``error:`` line. A family whose files each hold several parts, or whose configs depend on one
another, reads the files it was given as one checkpoint (its ``open_files`` hook: LTX-2.0's release file and
Gemma-3); the others are read file by file here (:class:`FilesCheckpoint`).
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.arch import SOURCE_KEY
from vidax_core.io.checkpoint import Checkpoint, TensorSource

#: ComfyUI models/ sub-folder -> the components its files may hold, in the order they are filled; an all-in-one
#: file of ``checkpoints/`` may serve any component its id's patterns name it for (LTX-Video: the DiT and the VAE).
COMFY_FOLDERS: dict[str, tuple[str, ...]] = {
    "diffusion_models": ("transformer", "transformer_2"), "unet": ("transformer", "transformer_2"),
    "checkpoints": ("transformer",), "text_encoders": ("text_encoder", "text_encoder_2"),
    "clip": ("text_encoder", "text_encoder_2"), "vae": ("vae", "audio_vae"), "clip_vision": ("image_encoder",),
    "latent_upscale_models": ("latent_upsampler",), "upscale_models": ("latent_upsampler",),
}
ALL_IN_ONE = "checkpoints"
OPTIONAL = ("latent_upsampler",)  # looked for in a ComfyUI folder, not required
#: Components ``model.files`` may name.
FILE_COMPONENTS = ("transformer", "transformer_2", "text_encoder", "text_encoder_2", "vae", "audio_vae",
                   "image_encoder", "latent_upsampler", "tokenizer", "tokenizer_2")
WEIGHT_COMPONENTS = tuple(c for c in FILE_COMPONENTS if not c.startswith("tokenizer"))
#: Prefixes a ComfyUI encoder file may carry or lack against the diffusers / transformers names.
ALIGN_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.", "transformer.")
#: Prefixes ComfyUI and all-in-one files put before a component's own names (removed when every key has one).
WRAPPERS = ("model.diffusion_model.", "diffusion_model.", "first_stage_model.", "vae.", "cond_stage_model.",
            "text_encoders.", "conditioner.")
SPIECE_KEY = "spiece_model"  # the SentencePiece model ComfyUI stores in its T5 / UMT5 / Gemma files (uint8 bytes)
#: How a Gemma SentencePiece model tokenizes (transformers' GemmaTokenizer): ``<bos>`` first, no end token,
#: ``<pad>`` = 0; :class:`~vidax_core.encoders.spiece_tokenizer.SpieceTokenizer` reads it.
GEMMA_SPIECE_CONFIG = {"add_bos_token": True, "add_eos_token": False, "extra_ids": 0, "bos_token": "<bos>",
                       "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
DENOISERS = ("transformer", "transformer_2")
ENCODERS = ("text_encoder", "text_encoder_2", "image_encoder")


def comfy_root(path: str) -> str | None:
    """The folder holding ComfyUI's model sub-folders: ``path`` itself or its ``split_files/`` / ``models/``."""
    for root in (path, os.path.join(path, "split_files"), os.path.join(path, "models")):
        if os.path.isdir(root) and any(os.path.isdir(os.path.join(root, d)) for d in COMFY_FOLDERS):
            return root
    return None


def _weights(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "*.safetensors")))


def find_files(root: str, spec: Any, needed: Sequence[str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(component -> file, component -> the files seen where none fitted) for the ``needed`` components in a ComfyUI
    folder: the file matching the id's :attr:`ModelSpec.comfy_files` patterns (of several, the widest dtype), else
    the only file of the component's sub-folders when it is that folder's first component."""
    patterns = dict(getattr(spec, "comfy_files", None) or {})
    found: dict[str, str] = {}
    seen: dict[str, list[str]] = {}
    for comp in needed:
        subs = [sub for sub, comps in COMFY_FOLDERS.items() if comp in comps]
        files = [f for sub in subs for f in _weights(os.path.join(root, sub))]
        pats = patterns.get(comp, ())
        extra = [f for f in _weights(os.path.join(root, ALL_IN_ONE)) if f not in files]
        hits = [f for f in files + extra if _matches(f, pats)]
        first = all(COMFY_FOLDERS[sub][0] == comp for sub in subs)
        if hits:
            found[comp] = _preferred(hits)
        elif len(files) == 1 and first:
            found[comp] = files[0]
        else:
            seen[comp] = [os.path.basename(f) for f in files]
    return found, seen


def _matches(path: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(os.path.basename(path).lower(), p.lower()) for p in patterns)


def _preferred(files: list[str]) -> str:
    """Of several files for one part (the fp16, bf16 and fp8 of one model), the one in the widest dtype; a name
    without a dtype (``ltx-2-19b-dev.safetensors`` beside its ``-fp8``) is the release's own bf16."""
    rank = ("fp32", "bf16", "fp16", "fp8_scaled", "fp8")

    def key(f: str) -> tuple[float, str]:
        name = os.path.basename(f).lower()
        return next((float(i) for i, r in enumerate(rank) if r in name), 1.5), name

    return min(files, key=key)


class StrippedTensors(Mapping[str, Any]):
    """``source`` without a wrapper prefix, and without ComfyUI's tokenizer blob (``spiece_model``)."""

    def __init__(self, source: Any, prefix: str = "") -> None:
        self.source, self.prefix = source, prefix
        self.original = {k[len(prefix):]: k for k in source if k.startswith(prefix) and k != SPIECE_KEY}

    def __getitem__(self, key: str) -> Any:
        return self.source[self.original[key]]

    def nbytes(self, key: str) -> int:
        return self.source.nbytes(self.original[key])

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.source.shape(self.original[key]))

    def dtype(self, key: str) -> np.dtype:
        return self.source.dtype(self.original[key])

    @property
    def metadata(self) -> dict:
        return getattr(self.source, "metadata", {})

    def __iter__(self) -> Iterator[str]:
        return iter(self.original)

    def __len__(self) -> int:
        return len(self.original)


def strip_wrapper(source: Any) -> StrippedTensors:
    """``source`` with the one wrapper prefix every key carries removed (none: unchanged)."""
    keys = [k for k in source if k != SPIECE_KEY]
    for prefix in WRAPPERS:
        if keys and all(k.startswith(prefix) for k in keys):
            return StrippedTensors(source, prefix)
    return StrippedTensors(source)


class DequantizedTensors(Mapping[str, Any]):
    """An 8-bit VAE or upsampler file (ComfyUI ``scaled_fp8``, ``comfy_quant``, plain fp8) as float32 weights: each
    scaled weight multiplied by its scale on read, the scale and marker keys hidden. Denoisers and encoders keep
    their 8-bit kernels."""

    def __init__(self, source: Any, where: str) -> None:
        from vidax_core.quant.source import QuantizedTensors

        self.view = QuantizedTensors(source, where=where)
        self.source = source

    def __getitem__(self, key: str) -> np.ndarray:
        from vidax_core.quant.source import Quantized

        value = self.view[key]
        if isinstance(value, Quantized):
            return np.asarray(value, np.float32)  # its 8-bit values times its scale
        arr = np.asarray(value)
        return arr.astype(np.float32) if arr.dtype.itemsize == 1 and arr.dtype.kind not in "iub" else arr

    def nbytes(self, key: str) -> int:
        return self.view.nbytes(key)

    def shape(self, key: str) -> tuple[int, ...]:
        return self.view.shape(key)

    def dtype(self, key: str) -> np.dtype:
        dt = np.dtype(self.view.dtype(key))
        return np.dtype(np.float32) if dt.itemsize == 1 and dt.kind not in "iub" else dt

    def __iter__(self) -> Iterator[str]:
        return iter(self.view)

    def __len__(self) -> int:
        return len(self.view)


class AlignedTensors(StrippedTensors):
    """An encoder file under the names its diffusers / transformers component uses: a prefix swapped (ComfyUI's
    Qwen / Gemma files keep ``model.layers.N``, a composite model's text tower reads ``model.language_model.``) and
    the tensors the component has no place for left out (a vision tower, an LM head, ComfyUI's extras)."""

    def __init__(self, source: Any, rename: Callable[[str], str | None]) -> None:
        self.source, self.prefix = source, ""
        self.original = {}
        for key in source:
            new = rename(key)
            if new is not None:
                self.original[new] = key


def align(tensors: Any, wanted: set[str]) -> Any:
    """``tensors`` renamed onto ``wanted`` (the component's published names) by the prefix change that makes most
    of them match, the keys outside ``wanted`` left out; unchanged when they match already or nothing fits well
    (the conversion then reports what is wrong, by the file's names)."""
    keys = [k for k in tensors if k != SPIECE_KEY]
    if not keys or not wanted:
        return tensors
    swaps = [("", "")] + [(a, "") for a in ALIGN_PREFIXES] + [("", b) for b in ALIGN_PREFIXES] + [
        (a, b) for a in ALIGN_PREFIXES for b in ALIGN_PREFIXES if a != b]

    def mapped(swap: tuple[str, str], key: str) -> str | None:
        old, new = swap
        return new + key[len(old):] if key.startswith(old) else None

    best = max(swaps, key=lambda sw: sum(1 for k in keys if mapped(sw, k) in wanted))
    hits = sum(1 for k in keys if mapped(best, k) in wanted)
    if hits < 0.5 * min(len(wanted), len(keys)):  # a file of fewer layers than the published model aligns too
        return tensors
    if best == ("", "") and all(k in wanted for k in keys):
        return tensors
    return AlignedTensors(tensors, lambda k: m if (m := mapped(best, k)) in wanted else None)


def spiece_folder(source: Any, where: str, config: Mapping[str, Any] | None = None) -> str | None:
    """The SentencePiece model a ComfyUI T5 / UMT5 / Gemma file carries, written once into vidax's cache as a
    tokenizer folder (``spiece.model``, and ``config`` as its ``tokenizer_config.json``: Gemma's
    :data:`GEMMA_SPIECE_CONFIG`); None when the file has none."""
    if SPIECE_KEY not in source:
        return None
    data = np.asarray(source[SPIECE_KEY]).astype(np.uint8).tobytes()
    if not data:
        raise UserError(f"{where}: its {SPIECE_KEY} tensor is empty: re-download the file")
    extra = json.dumps(dict(config), sort_keys=True).encode() if config else b""
    digest = hashlib.sha256(data + extra).hexdigest()[:16]
    folder = os.path.join(os.path.expanduser(os.environ.get("VIDAX_CACHE", "~/.cache/vidax")), "tokenizers", digest)
    from vidax_core.io.outputs import write_atomic

    for name, blob in (("spiece.model", data), ("tokenizer_config.json", extra)):
        target = os.path.join(folder, name)
        if blob and not os.path.isfile(target):
            os.makedirs(folder, exist_ok=True)
            write_atomic(target, lambda tmp, blob=blob: _write(tmp, blob))
    return folder


def is_gemma(config: Mapping[str, Any] | None) -> bool:
    """Whether a published text encoder config is a Gemma's (its SentencePiece model tokenizes as Gemma's)."""
    names = [str((config or {}).get("model_type", ""))] + [str(a) for a in (config or {}).get("architectures") or []]
    return any("gemma" in n.lower() for n in names)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _tokenizer_folder(path: str, key: str) -> str:
    """``model.files.<key>`` as a tokenizer folder: a folder, or the folder of a tokenizer.json / spiece.model."""
    if os.path.isdir(path):
        return path
    if os.path.basename(path) in ("tokenizer.json", "spiece.model"):
        return os.path.dirname(path) or "."
    raise UserError(f"model.files.{key} {path} is neither a tokenizer folder nor a tokenizer.json / spiece.model file")


def open_file(path: str, component: str) -> tuple[TensorSource, Any]:
    """(the file's tensors, those ``component`` reads): the wrapper prefix removed; an 8-bit encoder's kernels kept
    8-bit beside their scales, an 8-bit VAE or upsampler dequantised on read, a denoiser as stored."""
    where = f"{os.path.basename(path)} ({component})"
    raw = TensorSource([path])
    tensors: Any = strip_wrapper(raw)
    if component not in DENOISERS:
        from vidax_core.quant.source import QuantizedTensors, read_layout

        layout = read_layout(tensors, where)
        if layout.name is not None and component in ENCODERS:
            tensors = QuantizedTensors(tensors, layout, where)  # its towers keep the 8-bit kernels
        elif layout.name is not None:
            tensors = DequantizedTensors(tensors, where)
    return raw, tensors


class FilesCheckpoint(Checkpoint):
    """A checkpoint whose components come from single files (``files``: component -> file), the rest (configs,
    scheduler, tokenizers) from ``base`` (a folder's checkpoint, or the id's published layout)."""

    def __init__(self, files: Mapping[str, str], base: Checkpoint, spec: Any, plugins: Any, source: str,
                 tokenizers: Mapping[str, str] | None = None,
                 fetch_tokenizer: Callable[[str], str | None] | None = None) -> None:
        super().__init__(source, source=source)
        self.root = source
        self.files, self.base, self.spec, self.plugins = dict(files), base, spec, plugins
        self.model_index = dict(base.model_index)
        self._tokenizers = dict(tokenizers or {})
        self._fetch_tokenizer = fetch_tokenizer
        self._read: dict[str, tuple[Any, dict | None]] = {}

    # -- reading one file --------------------------------------------------------------------------------------
    def _component(self, component: str) -> tuple[Any, dict | None]:
        """(tensors in diffusers names, config or None = the base's) of a file component, read once."""
        if component not in self._read:
            path = self.files[component]
            where = f"{os.path.basename(path)} ({component})"
            raw, tensors = open_file(path, component)
            published = self._base_config(component)
            answer = self.plugins.call("component_file", self.spec, component=component, tensors=tensors,
                                       published=published)
            if answer is None and component == "vae":  # the Wan VAE's original names (Wan, SkyReels, Helios, Cosmos)
                from vidax_core.vae.wan_original import read_file

                answer = read_file(tensors)
            if answer is not None:
                tensors, config = answer
            else:
                if component not in DENOISERS:
                    tensors = align(tensors, self._base_keys(component))
                config = _config_from_shapes(component, tensors, published)
            if config is not None:
                config = {**config, SOURCE_KEY: path}
            self._read[component] = (tensors, config)
            if component.startswith("text_encoder"):
                folder = spiece_folder(raw, where, GEMMA_SPIECE_CONFIG if is_gemma(published) else None)
                tok = "tokenizer" + component[len("text_encoder"):]
                if folder and tok not in self._tokenizers:
                    self._tokenizers[tok] = folder
        return self._read[component]

    def _base_keys(self, component: str) -> set[str]:
        """The tensor names ``component`` has in the base (the published layout's, or the base folder's)."""
        try:
            return set(self.base.read_tensors(component)) if self.base.has(component) else set()
        except UserError:
            return set()

    def _base_weights(self, component: str) -> bool:
        """Whether the base really holds ``component``'s weights (the published layout lists names only)."""
        if not self.base.has(component):
            return False
        if not getattr(self.base, "published", False):
            return True
        return component not in WEIGHT_COMPONENTS and not component.startswith("transformer")

    def _base_config(self, component: str) -> dict | None:
        try:
            return self.base.config(component) if self.base.has(component) else None
        except UserError:
            return None

    # -- Checkpoint API ----------------------------------------------------------------------------------------
    def has(self, component: str) -> bool:
        if component in self.files or component in self._tokenizers:
            return True
        if component.startswith("tokenizer") and self._find_tokenizer(component):
            return True
        return self._base_weights(component) if component in WEIGHT_COMPONENTS else self.base.has(component)

    def path(self, component: str) -> str:
        if component in self.files:
            return self.files[component]
        if component.startswith("tokenizer"):
            found = self._find_tokenizer(component)
            if found:
                return found
        return self.base.path(component)

    def require(self, component: str) -> str:
        if component.startswith("tokenizer") and component not in self.files:
            found = self._find_tokenizer(component)
            if found:
                return found
            raise UserError(f"checkpoint {self.source} has no {component}: its text encoder file carries none; set "
                            f"model.files.{component} to a tokenizer folder (a tokenizer.json or spiece.model)")
        if component in self.files:
            return self.files[component]
        return self.base.require(component)

    def _find_tokenizer(self, component: str) -> str | None:
        if component in self._tokenizers:
            return self._tokenizers[component]
        encoder = "text_encoder" + component[len("tokenizer"):]
        if encoder in self.files:
            self._component(encoder)  # a ComfyUI T5 file carries its SentencePiece model
            if component in self._tokenizers:
                return self._tokenizers[component]
        if not getattr(self.base, "published", False) and self.base.has(component):
            return self.base.path(component)
        listed = self.base.has(component) or component in self.base.model_index  # a layout may list it only
        if self._fetch_tokenizer is not None and getattr(self.base, "published", False) and listed:
            folder = self._fetch_tokenizer(component)
            if folder:
                self._tokenizers[component] = folder
                return folder
        return None

    def config(self, component: str) -> dict[str, Any]:
        if component in self.files and not component.startswith("tokenizer"):
            config = self._component(component)[1]
            if config is not None:
                return config
        if component.startswith("tokenizer") and self.has(component):
            folder = self.require(component)
            return Checkpoint(os.path.dirname(folder)).config(os.path.basename(folder)) \
                if os.path.isfile(os.path.join(folder, "tokenizer_config.json")) else {}
        return self.base.config(component)

    def weight_files(self, component: str) -> list[str]:
        if component in self.files:
            return [self.files[component]]
        return self.base.weight_files(component)

    def read_tensors(self, component: str) -> Mapping[str, Any]:
        if component in self.files:
            return self._component(component)[0]
        return self.base.read_tensors(component)


def _config_from_shapes(component: str, tensors: Any, published: dict | None) -> dict | None:
    """The config of a file in diffusers / transformers names: the published one, with a T5-family or decoder-LLM
    (Qwen, Gemma) encoder's sizes (vocabulary, width, depth, heads, feed-forward) read from its tensors."""
    if published is None:
        return None
    if str(published.get("model_type", "")) in ("t5", "umt5", "mt5") and "shared.weight" in tensors:
        from vidax_core.encoders.t5 import config_from_tensors

        return config_from_tensors(tensors, published)
    from vidax_core.encoders import llm_config

    if component in ENCODERS and llm_config.is_decoder_llm(tensors):
        return llm_config.config_from_tensors(tensors, published)
    return published


def needed_components(base: Checkpoint) -> list[str]:
    """The weight components a run of the id reads (those of its published layout or base folder)."""
    comps = ("transformer", "transformer_2", "text_encoder", "text_encoder_2", "vae", "image_encoder")
    out = []
    for c in comps:
        try:
            if base.has(c) and (not getattr(base, "published", False) or base.read_tensors(c) is not None):
                out.append(c)
        except UserError:
            continue
    return out


def open_files(spec: Any, plugins: Any, *, files: Mapping[str, str] | None, folder: str | None,
               base: Checkpoint, source: str, fetch_tokenizer: Callable[[str], str | None] | None) -> Checkpoint:
    """The run's checkpoint of single files: ``files`` (``model.files``) and a ComfyUI ``folder``'s files for the
    components the id needs, the rest from ``base``; every needed component missing from both is named in one
    :class:`UserError`. The family's ``open_files`` hook may read them as one checkpoint; else each file is read on
    its own (:class:`FilesCheckpoint`)."""
    files = dict(files or {})
    for key, path in files.items():
        if key not in FILE_COMPONENTS:
            raise UserError(f"model.files.{key} is not a component vidax reads from a file; use "
                            f"{', '.join(FILE_COMPONENTS)}")
        if not os.path.exists(os.path.expanduser(path)):
            raise UserError(f"model.files.{key}: {path} does not exist")
    files = {k: os.path.expanduser(v) for k, v in files.items()}
    tokenizers = {k: _tokenizer_folder(v, k) for k, v in files.items() if k.startswith("tokenizer")}
    weights = {k: v for k, v in files.items() if not k.startswith("tokenizer")}
    for key, path in weights.items():
        if not os.path.isfile(path) or not path.endswith(".safetensors"):
            raise UserError(f"model.files.{key}: {path} is not a .safetensors file")
    needed = needed_components(base)
    published = getattr(base, "published", False)
    seen: dict[str, list[str]] = {}
    if folder is not None:  # the upscaler is looked for, not required (a one-pass run needs none)
        wanted = [c for c in needed + list(OPTIONAL) if c not in weights]
        found, seen = find_files(comfy_root(folder) or folder, spec, wanted)
        weights = {**found, **weights}
    patterns = dict(getattr(spec, "comfy_files", None) or {})
    for comp in needed:  # an all-in-one file named for one part serves the others its name is published for
        hit = next((f for f in weights.values() if _matches(f, patterns.get(comp, ()))), None)
        if comp not in weights and hit:
            weights[comp] = hit
    missing = [c for c in needed if c not in weights and (published or not base.has(c))]
    if missing:
        parts = []
        for comp in missing:
            pats = patterns.get(comp, ())
            sub = next(s for s, cs in COMFY_FOLDERS.items() if comp in cs)
            files = seen.get(comp) or []
            there = f"; found {', '.join(files[:4])}" if files else ""
            parts.append(f"{comp} ({sub}/{pats[0] if pats else '*.safetensors'}{there})")
        where = f"ComfyUI folder {folder}" if folder else "model.files"
        raise UserError(f"{where} lacks a file for {spec.id}'s " + "; ".join(parts)
                        + ": add the files or name each with model.files.<component>=FILE")
    opened = plugins.call("open_files", spec, files={**weights, **tokenizers}, base=base)
    if opened is not None:  # the family reads its files as one checkpoint (LTX-2.0: one file holds most parts)
        opened.source = source
        return opened
    return FilesCheckpoint(weights, base, spec, plugins, source, tokenizers, fetch_tokenizer)
