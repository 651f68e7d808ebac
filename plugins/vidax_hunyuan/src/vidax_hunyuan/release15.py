"""The original HunyuanVideo-1.5 release folder answering in diffusers terms (pickle-free, lazily).

``hf download tencent/HunyuanVideo-1.5`` gives the DiTs, the VAE and a scheduler file; the release's
checkpoints-download.md has the user add the encoders under the same root::

    <root>/transformer/<res>_<task>[_distilled|_step_distilled]/   config.json, *.safetensors (original names)
    <root>/vae/                          config.json (AutoencoderKLConv3D), diffusion_pytorch_model.safetensors
    <root>/text_encoder/llm/             Qwen/Qwen2.5-VL-7B-Instruct (weights, tokenizer, chat template)
    <root>/text_encoder/byt5-small/      google/byt5-small (its config and byte tokenizer)
    <root>/text_encoder/Glyph-SDXL-v2/checkpoints/byt5_model.pt     the glyph byT5 weights (Glyph-SDXL-v2)
    <root>/vision_encoder/siglip/        black-forest-labs/FLUX.1-Redux-dev (image_encoder/, feature_extractor/)

``model.checkpoint=<root>`` runs the id's DiT (``480p_t2v`` ... ``480p_i2v_step_distilled``);
``model.checkpoint=<root>/transformer/<variant>`` runs that DiT with the rest of its release: how a CFG-distilled
DiT (``720p_t2v_distilled``) is chosen. The DiT's names are :mod:`.original_dit15`'s, the VAE's are renamed here
(``down.N.block.M`` -> ``down_blocks.N.resnets.M``, ``mid.attn_1.q`` -> ``mid_block.attentions.0.to_q``...), the
glyph byT5 is diffusers' conversion (``module.text_tower.encoder.*`` -> ``encoder.*``, vocabulary grown by its
color and font tokens). The release has no guider and its pipeline sets the flow shift per DiT (the README's
"Optimal Inference Configurations"), not from scheduler/: so does this reader; the CFG scale is
``sampling.guidance_scale`` (1 in the distilled configs).
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint, TensorSource, read_json_file
from vidax_core.io.renamed import RenamedTensors

VARIANT = re.compile(r"(480|720)p_(t2v|i2v)(_distilled|_step_distilled)?")
FOLDERS = {"text_encoder": "text_encoder/llm", "tokenizer": "text_encoder/llm",
           "text_encoder_2": "text_encoder/byt5-small", "tokenizer_2": "text_encoder/byt5-small",
           "image_encoder": "vision_encoder/siglip/image_encoder",
           "feature_extractor": "vision_encoder/siglip/feature_extractor"}
GLYPH = "text_encoder/Glyph-SDXL-v2/checkpoints/byt5_model.pt"
# where checkpoints-download.md gets each added folder
SOURCES = {"text_encoder/llm": "Qwen/Qwen2.5-VL-7B-Instruct", "text_encoder/byt5-small": "google/byt5-small",
           GLYPH: "AI-ModelScope/Glyph-SDXL-v2 (modelscope)",
           "vision_encoder/siglip": "black-forest-labs/FLUX.1-Redux-dev"}
# release config.json key -> diffusers key; diffusers-named keys in the file are taken as they are
DIT_KEYS = {"rope_dim_list": "rope_axes_dim", "rope_theta": "rope_theta"}
DIFFUSERS_DIT_KEYS = ("rope_axes_dim", "rope_theta", "target_size")
VAE_KEYS = {"in_channels": "in_channels", "out_channels": "out_channels", "latent_channels": "latent_channels",
            "block_out_channels": "block_out_channels", "layers_per_block": "layers_per_block",
            "ffactor_spatial": "spatial_compression_ratio", "ffactor_temporal": "temporal_compression_ratio",
            "scaling_factor": "scaling_factor", "downsample_match_channel": "downsample_match_channel",
            "upsample_match_channel": "upsample_match_channel"}
VAE_RENAMES = [
    (r"(encoder|decoder)\.(down|up)\.(\d+)\.block\.(\d+)\.", r"\1.\2_blocks.\3.resnets.\4."),
    (r"encoder\.down\.(\d+)\.downsample\.", r"encoder.down_blocks.\1.downsamplers.0."),
    (r"decoder\.up\.(\d+)\.upsample\.", r"decoder.up_blocks.\1.upsamplers.0."),
    (r"(encoder|decoder)\.mid\.block_(\d)\.", lambda m: f"{m.group(1)}.mid_block.resnets.{int(m.group(2)) - 1}."),
    (r"(encoder|decoder)\.mid\.attn_1\.(q|k|v)\.", r"\1.mid_block.attentions.0.to_\2."),
    (r"(encoder|decoder)\.mid\.attn_1\.", r"\1.mid_block.attentions.0."),
]


def id_variant(spec_id: str) -> str:
    """The release folder of an id's DiT (``hunyuanvideo-1.5-i2v-480p-step-distilled``: ``480p_i2v_step_distilled``)."""
    m = re.fullmatch(r"hunyuanvideo-1\.5-(t2v|i2v)-(480p|720p)(-step-distilled)?", spec_id)
    if m is None:
        raise UserError(f"{spec_id} is not a HunyuanVideo-1.5 id")
    return f"{m.group(2)}_{m.group(1)}" + ("_step_distilled" if m.group(3) else "")


def flow_shift(variant: str) -> float:
    """The release pipeline's flow shift of a DiT: 7 step-distilled, else 5 at 480p, 9 (T2V) / 7 (I2V) at 720p."""
    m = VARIANT.fullmatch(variant)
    if m.group(3) == "_step_distilled" or (m.group(1), m.group(2)) == ("720", "i2v"):
        return 7.0
    return 5.0 if m.group(1) == "480" else 9.0


def vae_key(key: str) -> str:
    """A release VAE key -> diffusers ``AutoencoderKLHunyuanVideo15``'s."""
    for pattern, repl in VAE_RENAMES:
        key, n = re.subn("^" + pattern, repl, key, count=1)
        if n:
            break
    return key.replace(".nin_shortcut.", ".conv_shortcut.")


def glyph_key(key: str) -> str:
    """A Glyph-SDXL-v2 ``byt5_model.pt`` key -> ``T5EncoderModel``'s, as diffusers' conversion renames it."""
    return "encoder." + key.removeprefix("module.text_tower.encoder.")


def find_release(path: str) -> tuple[str, str | None] | None:
    """(release root, the DiT folder named by the path or None) when ``path`` is a release root or one of its
    ``transformer/<variant>`` folders; None otherwise."""
    path = os.path.normpath(os.path.abspath(path))
    parent = os.path.dirname(path)
    if os.path.basename(parent) == "transformer" and os.path.isdir(os.path.join(os.path.dirname(parent), "vae")):
        return os.path.dirname(parent), os.path.basename(path)
    transformer = os.path.join(path, "transformer")
    if os.path.isdir(transformer) and not os.path.exists(os.path.join(transformer, "config.json")) and any(
            VARIANT.fullmatch(d) for d in os.listdir(transformer)):
        return path, None
    return None


class Release15Checkpoint(Checkpoint):
    """The release root with one DiT folder (``variant``) chosen."""

    def __init__(self, root: str, variant: str) -> None:
        super().__init__(root)
        self.variant = variant

    def path(self, component: str) -> str:
        if component == "transformer":
            return os.path.join(self.root, "transformer", self.variant)
        return os.path.join(self.root, FOLDERS.get(component, component))

    def has(self, component: str) -> bool:
        return component == "scheduler" or os.path.isdir(self.path(component))

    def config(self, component: str) -> dict[str, Any]:
        if component == "scheduler":
            return {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": flow_shift(self.variant),
                    "num_train_timesteps": 1000}
        if component == "transformer":
            from .original_dit15 import dit15_config

            return dit15_config(self.read_tensors("transformer"), self.variant, self._dit_overrides())
        if component == "vae":
            return self._vae_config()
        cfg = super().config(component)
        if component == "text_encoder_2":  # the glyph checkpoint grew byt5-small's vocabulary
            cfg["vocab_size"] = int(self.read_tensors(component).shape("encoder.embed_tokens.weight")[0])
        return cfg

    def read_tensors(self, component: str) -> Mapping[str, Any]:
        if component == "transformer":
            from .original_dit15 import OriginalDiT15

            return OriginalDiT15(TensorSource(self.weight_files(component)))
        if component == "vae":
            return RenamedTensors(TensorSource(self.weight_files(component)), vae_key)
        if component == "text_encoder_2":
            from vidax_core.io.pth import PthFile

            return RenamedTensors(PthFile(os.path.join(self.root, GLYPH)), glyph_key)
        return super().read_tensors(component)

    def _file(self, component: str) -> dict[str, Any]:
        path = os.path.join(self.path(component), "config.json")
        data = read_json_file(path) if os.path.isfile(path) else {}
        if not isinstance(data, dict):
            raise UserError(f"{path} must hold a JSON object")
        return data

    def _dit_overrides(self) -> dict[str, Any]:
        data = self._file("transformer")
        over = {DIT_KEYS[k]: v for k, v in data.items() if k in DIT_KEYS}
        over.update({k: data[k] for k in DIFFUSERS_DIT_KEYS if k in data})
        return over

    def _vae_config(self) -> dict[str, Any]:
        data = self._file("vae")
        if data.get("shift_factor"):
            raise UserError(f"{self.path('vae')}/config.json: shift_factor={data['shift_factor']} is not applied by "
                            "the HunyuanVideo-1.5 pipelines vidax follows (diffusers' conversion drops it)")
        return {"_class_name": "AutoencoderKLHunyuanVideo15",
                **{VAE_KEYS[k]: v for k, v in data.items() if k in VAE_KEYS}}


def missing_parts(root: str, i2v: bool) -> list[str]:
    need = ["vae", "text_encoder/llm", "text_encoder/byt5-small", GLYPH] + (["vision_encoder/siglip"] if i2v else [])
    return [p for p in need if not os.path.exists(os.path.join(root, p))]


def open_release(spec: Any, path: str) -> Release15Checkpoint | None:
    """``model.checkpoint`` at a release root or one of its DiT folders; None for any other folder."""
    found = find_release(path)
    if found is None:
        return None
    root, variant = found
    want = id_variant(spec.id)
    variant = variant or want
    allowed = (want,) if want.endswith("_step_distilled") else (want, want + "_distilled")
    if variant not in allowed:
        hint = ("; the step-distilled DiT runs under hunyuanvideo-1.5-i2v-480p-step-distilled"
                if variant.endswith("_step_distilled") else "")
        raise UserError(f"{path}: transformer/{variant}/ is not a DiT {spec.id} runs (it runs "
                        + " or ".join(f"transformer/{a}/" for a in allowed) + ")" + hint)
    if not os.path.isdir(os.path.join(root, "transformer", variant)):
        have = sorted(d for d in os.listdir(os.path.join(root, "transformer")) if VARIANT.fullmatch(d))
        raise UserError(f"{root} has no transformer/{variant}/ for {spec.id} (it has {', '.join(have) or 'none'}): "
                        f"hf download tencent/HunyuanVideo-1.5 --include 'transformer/{variant}/*'")
    missing = missing_parts(root, "i2v" in spec.tasks)
    if missing:
        first = missing[0]
        source = SOURCES.get(first, "tencent/HunyuanVideo-1.5")
        raise UserError(f"{root} holds the HunyuanVideo-1.5 release but no {first}: add it from {source} as the "
                        "release's checkpoints-download.md says (docs/models/hunyuan.md lists the folder)")
    return Release15Checkpoint(root, variant)


def read_component_file(spec: Any, component: str, tensors: Any, published: Mapping[str, Any] | None):
    """A single file of an id's component in the release's names (a ComfyUI folder's or ``model.files``): the
    DiT (``double_blocks.N.img_attn_q``..., its config from the shapes, the id's ``<res>_<task>`` and the published
    RoPE axes, theta and target size) or the VAE
    (``down.N.block.M``..., its config the published one at the widths of its tensors); None for a file in
    diffusers names, or another part."""
    if component == "transformer" and "img_in.proj.weight" in tensors:
        from .original_dit15 import OriginalDiT15, dit15_config

        renamed = OriginalDiT15(tensors)
        fixed = {k: published[k] for k in DIFFUSERS_DIT_KEYS if published and k in published}  # RoPE, target size
        return renamed, dit15_config(renamed, id_variant(spec.id), fixed)
    if component == "vae" and any(k.startswith(("encoder.down.", "decoder.up.")) for k in tensors):
        if published is None:
            raise UserError(f"{spec.id}: no published VAE config ships to read a VAE file in the release's names")
        renamed = RenamedTensors(tensors, vae_key)
        return renamed, vae_config(renamed, published)
    return None


def vae_config(tensors: Any, published: Mapping[str, Any]) -> dict[str, Any]:
    """The published VAE config with the widths a VAE file's tensors (diffusers names) fix: channels in and out,
    latent channels, each encoder stage's width and resnets per stage."""
    def shape(key: str) -> tuple[int, ...]:
        return tuple(tensors.shape(key))

    stages = sorted({int(m[1]) for k in tensors if (m := re.match(r"encoder\.down_blocks\.(\d+)\.", k))})
    per_stage = {int(m[1]) for k in tensors if (m := re.match(r"encoder\.down_blocks\.0\.resnets\.(\d+)\.", k))}
    return {**dict(published), "in_channels": shape("encoder.conv_in.conv.weight")[1],
            "out_channels": shape("decoder.conv_out.conv.weight")[0],
            "latent_channels": shape("decoder.conv_in.conv.weight")[1], "layers_per_block": len(per_stage),
            "block_out_channels": [shape(f"encoder.down_blocks.{i}.resnets.0.conv1.conv.weight")[0] for i in stages]}
