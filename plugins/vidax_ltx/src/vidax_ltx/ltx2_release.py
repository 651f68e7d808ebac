"""The original LTX-2.x release folders answering in diffusers terms (lazily, no weight read to open them).

LTX-2.5 (``hf download Lightricks/LTX-2.5 ... --local-dir ROOT``, one file per part)::

    ROOT/diffusion_models/ltx-2.5-22b-{dev,distilled}-transformer-bf16.safetensors   DiT + text connectors
    ROOT/text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors    Gemma-4 (its config and tokenizer inside)
                                                                        + the connectors' input projections
    ROOT/vae/ltx-2.5-video-vae-conv-bf16.safetensors                    video VAE, convolutional decoder
    ROOT/vae/ltx-2.5-audio-vae-bf16.safetensors                         audio VAE + vocoder

LTX-2.0 (Lightricks/LTX-2): ``ROOT/ltx-2-19b-dev.safetensors`` holds DiT, connectors, both VAEs and the vocoder;
the Gemma-3 encoder sits beside it in ``ROOT/text_encoder/`` (+ ``ROOT/tokenizer/``, or the tokenizer files in
``text_encoder/``): Lightricks/LTX-2's diffusers folders or google/gemma-3-12b-it-qat-q4_0-unquantized.

``model.checkpoint=ROOT`` runs the id's DiT. Keys are renamed as diffusers' conversion does (the DiT and connectors
by :mod:`.convert_ltx2` / :mod:`.ltx2_connectors`, the video VAE by :mod:`.vae_convert`; here the audio VAE's
statistics, the vocoder's names and the Gemma file's ComfyUI-flattened language-model keys), the configs come from
the files' metadata (:mod:`.ltx2_release_config`); the scheduler is diffusers' conversion's (the dev ids switch on
their shifting as for the diffusers layout). LTX-2.5's other video VAE file (``ltx-2.5-video-vae-bf16``) has a
diffusion decoder vidax does not implement: the convolutional one decodes the same latents.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any, Mapping

from vidax_core.errors import UserError
from vidax_core.io.arch import SOURCE_KEY
from vidax_core.io.checkpoint import Checkpoint, TensorSource
from vidax_core.io.renamed import RenamedTensors

from . import ltx2_release_config as rc

HUB_25, HUB_20 = "Lightricks/LTX-2.5", "Lightricks/LTX-2"
#: LTX-2.5 parts: component -> (the published file, the pattern another precision of it matches).
FILES_25 = {
    "text_encoder": ("text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors",
                     "text_encoders/gemma4-*.safetensors"),
    "vae": ("vae/ltx-2.5-video-vae-conv-bf16.safetensors", "vae/ltx-2.5-video-vae-conv*.safetensors"),
    "audio_vae": ("vae/ltx-2.5-audio-vae-bf16.safetensors", "vae/ltx-2.5-audio-vae*.safetensors"),
}
DIFFUSION_VAE_25 = "vae/ltx-2.5-video-vae-bf16.safetensors"
MONOLITH_20 = "ltx-2-19b-dev.safetensors"
# The published scheduler of the converted repositories (the distilled one; the dev ids add their shifting).
SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0,
    "use_dynamic_shifting": False, "base_shift": 0.95, "max_shift": 2.05, "base_image_seq_len": 1024,
    "max_image_seq_len": 4096, "shift_terminal": None, "invert_sigmas": False,
}
# The packed Gemma file (ltx-core ``gemma_assets``): HF config in metadata, tokenizer and sidecars as uint8 tensors.
GEMMA_CONFIG, TOKENIZER_JSON, ASSET_PREFIX = "gemma_config", "tokenizer_json", "hf_asset__"
_GEMMA_TOWERS = ("vision_model.", "multi_modal_projector.", "audio_projector.", "model.vision_embedder.",
                 "model.embed_vision.", "model.embed_audio.")


def transformer_file(spec_id: str) -> str:
    """The published DiT file of an LTX-2.5 id (``ltx-2.5-22b-distilled``: the distilled transformer)."""
    return f"diffusion_models/{spec_id}-transformer-bf16.safetensors"


def gemma_key(key: str) -> str | None:
    """A packed Gemma file key -> its transformers ``Gemma4UnifiedForConditionalGeneration`` name; None for the
    connectors' projections, the tokenizer and asset tensors and the vision / audio towers (the prompt path does
    not use them). ComfyUI's flattened language model (``model.layers.*``, ``model.embed_tokens.*``...) goes back
    under ``model.language_model.``."""
    if key.startswith(("text_embedding_projection.", TOKENIZER_JSON, ASSET_PREFIX, *_GEMMA_TOWERS)):
        return None
    if key.startswith("model.") and not key.startswith("model.language_model."):
        return "model.language_model." + key[len("model."):]
    return key


def audio_vae_key(key: str) -> str | None:
    """An original ``audio_vae.*`` key -> diffusers ``AutoencoderKLLTX2Audio``'s (the latent statistics renamed)."""
    if not key.startswith("audio_vae."):
        return None
    key = key[len("audio_vae."):]
    return {"per_channel_statistics.mean-of-means": "latents_mean",
            "per_channel_statistics.std-of-means": "latents_std"}.get(key, key)


def vocoder_key(key: str) -> str | None:
    """An original ``vocoder.*`` key (the prefix stripped once) -> diffusers': ``ups`` -> ``upsamplers``,
    ``resblocks`` -> ``resnets``, ``conv_pre`` / ``conv_post`` -> ``conv_in`` / ``conv_out``, ``act_post`` ->
    ``act_out``, ``downsample.lowpass`` -> ``downsample`` (diffusers' LTX-2.0 / 2.3 conversion tables)."""
    if not key.startswith("vocoder."):
        return None
    key = re.sub(r"(^|\.)ups\.", r"\1upsamplers.", key[len("vocoder."):])
    for old, new in (("resblocks", "resnets"), ("conv_pre", "conv_in"), ("conv_post", "conv_out"),
                     ("act_post", "act_out"), ("downsample.lowpass", "downsample")):
        key = key.replace(old, new)
    return key


def video_vae_key(n_down: int):
    """The original ``vae.*`` -> diffusers ``AutoencoderKLLTX2Video`` renaming for ``n_down`` encoder blocks."""
    from .vae_convert import original_vae_key

    return lambda key: original_vae_key(key, encoder_blocks=n_down, ltx2=True)


def _config_metadata(path: str, file: Any, key: str = "config") -> dict[str, Any]:
    raw = file.metadata.get(key)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        raise UserError(f"{path}: metadata '{key}' is not JSON: re-download the file") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: metadata '{key}' must be a JSON object: re-download the file")
    return data


class LTX2ReleaseCheckpoint(Checkpoint):
    """An LTX-2.x release folder; ``files`` maps transformer / text_encoder / vae / audio_vae to their
    safetensors (one monolith file for all four parts in LTX-2.0, whose text encoder is a folder or ComfyUI's
    Gemma-3 file). A Gemma file without a packed config (ComfyUI's) takes ``base``'s published one, its sizes read
    from the tensors; its tokenizer is ``tokenizer`` (a folder), else the SentencePiece model the file carries."""

    def __init__(self, root: str, files: Mapping[str, str], base: Checkpoint | None = None,
                 tokenizer: str | None = None) -> None:
        super().__init__(root)
        self.model_index = {"_class_name": "LTX2Pipeline"}
        self.files = dict(files)
        self.base, self.tokenizer = base, tokenizer
        self._open: dict[tuple[str, ...], TensorSource] = {}
        self._gemma: Any = None

    # -- files ---------------------------------------------------------------------------------------------------
    def _path(self, part: str) -> str:
        return self.files[part]

    def _source(self, *parts: str) -> TensorSource:
        paths = tuple(dict.fromkeys(self.files[p] for p in parts if p in self.files))
        if paths not in self._open:
            self._open[paths] = TensorSource(list(paths))
        return self._open[paths]

    def _meta(self, part: str, section: str) -> dict[str, Any]:
        path = self._path(part)
        src = self._source(part)
        return rc.section(_config_metadata(path, src.files[0]), section, path)

    @property
    def packed_gemma(self) -> bool:
        return "text_encoder" in self.files

    # -- Checkpoint API ------------------------------------------------------------------------------------------
    _PARTS = {"transformer": "transformer", "connectors": "transformer", "vae": "vae", "audio_vae": "audio_vae",
              "vocoder": "audio_vae"}

    def path(self, component: str) -> str:
        if component == "tokenizer" and not os.path.isdir(os.path.join(self.root, "tokenizer")):
            return os.path.join(self.root, "text_encoder")
        return super().path(component)

    def has(self, component: str) -> bool:
        if component in self._PARTS or component == "scheduler":
            return True
        if component in ("text_encoder", "tokenizer") and self.packed_gemma:
            return True
        return component != "transformer_full" and super().has(component)

    def require(self, component: str) -> str:
        if component in self._PARTS:
            return self._path(self._PARTS[component])
        if component == "scheduler":
            return self.root
        if component in ("text_encoder", "tokenizer") and self.packed_gemma:
            return self._path("text_encoder")
        return super().require(component)

    def weight_files(self, component: str) -> list[str]:
        if component in self._PARTS:
            return [self._path(self._PARTS[component])]
        if component == "text_encoder" and self.packed_gemma:
            return [self._path("text_encoder")]
        return super().weight_files(component)

    def config(self, component: str) -> dict[str, Any]:
        cfg = self._config(component)
        if cfg is None:
            return super().config(component)
        where = {"scheduler": "published"}.get(component, self.require(component))
        return {**cfg, SOURCE_KEY: f"{where} (metadata config, {component})"}

    def _config(self, component: str) -> dict[str, Any] | None:
        if component == "scheduler":
            return dict(SCHEDULER_CONFIG)
        if component == "transformer":
            t = self.read_tensors("transformer")
            return rc.dit_config(self._meta("transformer", "transformer"), t, t.shape,
                                 rc.gemma_width(self.config("text_encoder")))
        if component == "connectors":
            c = self.read_tensors("connectors")
            return rc.connectors_config(self._meta("transformer", "transformer"), self.config("text_encoder"), c,
                                        c.shape)
        if component == "vae":
            return rc.vae_config(self._meta("vae", "vae"), self.read_tensors("vae"), self._path("vae"))
        if component == "audio_vae":
            return rc.audio_vae_config(self._meta("audio_vae", "audio_vae"))
        if component == "vocoder":
            v = self.read_tensors("vocoder")
            return rc.vocoder_config(self._meta("audio_vae", "vocoder"), v, v.shape, self._path("audio_vae"))
        if component == "text_encoder" and self.packed_gemma:
            path = self._path("text_encoder")
            cfg = _config_metadata(path, self._source("text_encoder").files[0], GEMMA_CONFIG)
            if not cfg and self.base is not None and self.base.has("text_encoder"):  # ComfyUI's Gemma-3 file
                from vidax_core.encoders.llm_config import config_from_tensors

                return config_from_tensors(self.read_tensors("text_encoder"), self.base.config("text_encoder"))
            if not cfg:
                raise UserError(f"{path} has no '{GEMMA_CONFIG}' metadata: is it the LTX-2.5 text encoder "
                                "(gemma4-12b-with-proj)?")
            return cfg
        return None

    def read_tensors(self, component: str) -> Mapping[str, Any]:
        from .convert_ltx2 import original_dit_key
        from .ltx2_connectors import original_connector_key

        if component == "transformer":
            return RenamedTensors(self._source("transformer"), original_dit_key)
        if component == "connectors":
            return RenamedTensors(self._source("transformer", "text_encoder"), original_connector_key)
        if component == "vae":
            src = self._source("vae")
            downs = {k.split(".")[3] for k in src if k.startswith("vae.encoder.down_blocks.")}
            return RenamedTensors(src, video_vae_key(len(downs) or 9))
        if component == "audio_vae":
            return RenamedTensors(self._source("audio_vae"), audio_vae_key)
        if component == "vocoder":
            return RenamedTensors(self._source("audio_vae"), vocoder_key)
        if component == "text_encoder" and self.packed_gemma:
            if self._gemma is None:  # an 8-bit file (ComfyUI's fp8) keeps its kernels 8-bit beside their scales
                from vidax_core.io.component_files import open_file

                self._gemma = RenamedTensors(open_file(self._path("text_encoder"), "text_encoder")[1], gemma_key)
            return self._gemma
        return super().read_tensors(component)

    def open_tokenizer(self) -> Any:
        """The tokenizer: the packed Gemma file's (``tokenizer_json`` + its ``tokenizer_config.json``), else the
        ``tokenizer/`` folder's."""
        from vidax_core.encoders.tokenizer import TextTokenizer

        if self.tokenizer is not None:
            return TextTokenizer.from_dir(self.tokenizer)
        if not self.packed_gemma:
            return TextTokenizer.from_dir(self.require("tokenizer"))
        path = self._path("text_encoder")
        src = self._source("text_encoder")
        meta = src.files[0].metadata
        if TOKENIZER_JSON not in src:  # ComfyUI's Gemma-3 file: its SentencePiece model
            from vidax_core.io.component_files import GEMMA_SPIECE_CONFIG, SPIECE_KEY, spiece_folder

            folder = spiece_folder(src, f"{os.path.basename(path)} (text_encoder)", GEMMA_SPIECE_CONFIG)
            if folder is not None:
                return TextTokenizer.from_dir(folder)
            raise UserError(f"{path} holds no tokenizer ({TOKENIZER_JSON} or {SPIECE_KEY}): set model.files.tokenizer "
                            "to the Gemma tokenizer folder (tokenizer.json)")

        def asset(name: str) -> dict[str, Any]:
            key = ASSET_PREFIX + name
            raw = bytes(src[key]) if key in src else (meta.get(name) or "{}").encode()
            try:
                return json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise UserError(f"{path}: its {name} is not JSON: re-download the file") from None

        try:
            data = json.loads(bytes(src[TOKENIZER_JSON]).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise UserError(f"{path}: its {TOKENIZER_JSON} is not JSON: re-download the file") from None
        return TextTokenizer.from_json(data, asset("tokenizer_config.json"), asset("special_tokens_map.json"),
                                       where=f"{path} ({TOKENIZER_JSON})")


def _one(root: str, exact: str, pattern: str) -> str | None:
    """``root/exact`` when present, else the one file matching ``root/pattern`` (several: one line naming them)."""
    if os.path.isfile(os.path.join(root, exact)):
        return os.path.join(root, exact)
    found = sorted(glob.glob(os.path.join(root, pattern)))
    if len(found) > 1:
        raise UserError(f"{root} holds several files for {exact} ({', '.join(os.path.relpath(f, root) for f in found)})"
                        ": keep one")
    return found[0] if found else None


def _missing(root: str, rel: str, hub: str, spec_id: str, why: str = "") -> UserError:
    return UserError(f"{root} holds the {hub} release but no {rel}, which {spec_id} needs{why}: hf download {hub} "
                     f"{rel} --local-dir {root}")


def _open_25(spec_id: str, root: str) -> LTX2ReleaseCheckpoint:
    if not spec_id.startswith("ltx-2.5-"):
        raise UserError(f"{root} holds the LTX-2.5 release (diffusion_models/): {spec_id} runs LTX-2.0's "
                        f"{MONOLITH_20} ({HUB_20})")
    dit = transformer_file(spec_id)
    files = {"transformer": _one(root, dit, dit.replace("-bf16.safetensors", "*.safetensors"))}
    if files["transformer"] is None:
        raise _missing(root, dit, HUB_25, spec_id)
    for part, (exact, pattern) in FILES_25.items():
        files[part] = _one(root, exact, pattern)
        if files[part] is None:
            why = (" (vidax decodes with the convolutional decoder; the diffusion decoder of "
                   f"{DIFFUSION_VAE_25} is not implemented)") if part == "vae" else ""
            raise _missing(root, exact, HUB_25, spec_id, why)
    return LTX2ReleaseCheckpoint(root, files)


def _open_20(spec_id: str, root: str) -> LTX2ReleaseCheckpoint:
    monolith = os.path.join(root, MONOLITH_20)
    if spec_id != "ltx-2-19b-dev":
        raise UserError(f"{root} holds the LTX-2.0 release (ltx-2-19b-*.safetensors): {spec_id} runs the LTX-2.5 "
                        f"release ({HUB_25}: diffusion_models/, text_encoders/, vae/)")
    if not os.path.isfile(monolith):
        have = sorted(os.path.basename(f) for f in glob.glob(os.path.join(root, "ltx-2-19b-*.safetensors")))
        raise UserError(f"{root} has no {MONOLITH_20} for {spec_id} (it has {', '.join(have)}; vidax reads the bf16 "
                        f"dev file): hf download {HUB_20} {MONOLITH_20} --local-dir {root}")
    ckpt = LTX2ReleaseCheckpoint(root, dict.fromkeys(("transformer", "vae", "audio_vae"), monolith))
    if not os.path.isdir(os.path.join(root, "text_encoder")) or not os.path.isfile(
            os.path.join(ckpt.path("tokenizer"), "tokenizer.json")):
        raise UserError(f"{root} holds {MONOLITH_20} but no Gemma-3 text encoder: add text_encoder/ and tokenizer/ "
                        f"(the folders of {HUB_20}'s diffusers layout, or google/gemma-3-12b-it-qat-q4_0-unquantized "
                        "as text_encoder/)")
    return ckpt


#: LTX-2.0's single files as a ComfyUI models folder holds them (``checkpoints/``; :func:`.ltx2_files.open_files`).
COMFY_20 = ("checkpoints/ltx-2-19b-*.safetensors", "diffusion_models/ltx-2-19b-*.safetensors")


def _has(path: str, *patterns: str) -> bool:
    return any(glob.glob(os.path.join(path, p)) for p in patterns)


def find_release(path: str) -> str | None:
    """Which release layout ``path`` is: "2.5" (a ``diffusion_models/`` folder with an LTX-2.5 file in it or in
    ``vae/`` / ``text_encoders/``), "2.0" (a top-level ``ltx-2-19b-*.safetensors``) or None (another folder: a
    ComfyUI models folder of other models, or of LTX-2.0's files, left to the single-file reader)."""
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "model_index.json")):
        return None
    if os.path.isdir(os.path.join(path, "diffusion_models")) and _has(
            path, "diffusion_models/ltx-2.5-*.safetensors", "vae/ltx-2.5-*.safetensors", "text_encoders/gemma4-*"):
        return "2.5"
    return "2.0" if glob.glob(os.path.join(path, "ltx-2-19b-*.safetensors")) else None


def open_release(spec: Any, path: str) -> LTX2ReleaseCheckpoint | None:
    """``model.checkpoint`` at an LTX-2.x release folder; None for any other folder (an LTX-2.0 id's ComfyUI
    folder, LTX-2.5's files beside it or not, goes to the single-file reader)."""
    kind = find_release(path)
    if kind is None or (not spec.id.startswith("ltx-2.5-") and _has(path, *COMFY_20)):
        return None
    return _open_25(spec.id, path) if kind == "2.5" else _open_20(spec.id, path)
