"""The original HunyuanVideo release (tencent/HunyuanVideo) read in diffusers terms, pickle-free.

The DiT is ``<model>/transformers/mp_rank_00_model_states.pt``: a DeepSpeed ``{"module": state_dict}`` (unwrapped
by :class:`vidax_core.io.pth.PthFile`) with fused projections: ``img_attn_qkv`` / ``txt_attn_qkv`` /
``self_attn_qkv`` hold q, k, v stacked on the output axis, a single block's ``linear1`` holds q, k, v and the MLP
input, and the final AdaLN stores (shift, scale) where diffusers has (scale, shift). :class:`OriginalDiT` is a lazy
view of it under diffusers' key names (each split is read when converted). The VAE is
``<model>/vae/pytorch_model.pt`` (+ its ``config.json``, an ``AutoencoderKLCausal3D`` one), the text encoders are
the release's transformers folders ``text_encoder/`` (Llama, tokenizer inside; HunyuanVideo-I2V: the full LLaVA in
``text_encoder_i2v/`` with its image processor) and ``text_encoder_2/`` (CLIP-L). The I2V release
(``hunyuan-video-i2v-720p/``) is the ``token_replace`` DiT: same tensors, ``image_condition_type`` set by the id.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint, read_json_file

DIT_FILE = os.path.join("transformers", "mp_rank_00_model_states.pt")
MODEL_DIRS = ("", "hunyuan-video-t2v-720p", "hunyuan-video-i2v-720p")
# The published scheduler (diffusers' conversion writes FlowMatchEulerDiscreteScheduler with shift 7).
SCHEDULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 7.0, "num_train_timesteps": 1000}
RENAMES: list[tuple[str, str]] = [
    (r"img_in\.proj\.", "x_embedder.proj."),
    (r"time_in\.mlp\.0\.", "time_text_embed.timestep_embedder.linear_1."),
    (r"time_in\.mlp\.2\.", "time_text_embed.timestep_embedder.linear_2."),
    (r"guidance_in\.mlp\.0\.", "time_text_embed.guidance_embedder.linear_1."),
    (r"guidance_in\.mlp\.2\.", "time_text_embed.guidance_embedder.linear_2."),
    (r"vector_in\.in_layer\.", "time_text_embed.text_embedder.linear_1."),
    (r"vector_in\.out_layer\.", "time_text_embed.text_embedder.linear_2."),
    (r"txt_in\.input_embedder\.", "context_embedder.proj_in."),
    (r"txt_in\.t_embedder\.mlp\.0\.", "context_embedder.time_text_embed.timestep_embedder.linear_1."),
    (r"txt_in\.t_embedder\.mlp\.2\.", "context_embedder.time_text_embed.timestep_embedder.linear_2."),
    (r"txt_in\.c_embedder\.linear_(\d)\.", r"context_embedder.time_text_embed.text_embedder.linear_\1."),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.(norm1|norm2)\.",
     r"context_embedder.token_refiner.refiner_blocks.\1.\2."),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.self_attn_proj\.",
     r"context_embedder.token_refiner.refiner_blocks.\1.attn.to_out.0."),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.mlp\.fc1\.",
     r"context_embedder.token_refiner.refiner_blocks.\1.ff.net.0.proj."),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.mlp\.fc2\.",
     r"context_embedder.token_refiner.refiner_blocks.\1.ff.net.2."),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.adaLN_modulation\.1\.",
     r"context_embedder.token_refiner.refiner_blocks.\1.norm_out.linear."),
    (r"double_blocks\.(\d+)\.img_mod\.linear\.", r"transformer_blocks.\1.norm1.linear."),
    (r"double_blocks\.(\d+)\.img_attn_q_norm\.", r"transformer_blocks.\1.attn.norm_q."),
    (r"double_blocks\.(\d+)\.img_attn_k_norm\.", r"transformer_blocks.\1.attn.norm_k."),
    (r"double_blocks\.(\d+)\.img_attn_proj\.", r"transformer_blocks.\1.attn.to_out.0."),
    (r"double_blocks\.(\d+)\.img_mlp\.fc1\.", r"transformer_blocks.\1.ff.net.0.proj."),
    (r"double_blocks\.(\d+)\.img_mlp\.fc2\.", r"transformer_blocks.\1.ff.net.2."),
    (r"double_blocks\.(\d+)\.txt_mod\.linear\.", r"transformer_blocks.\1.norm1_context.linear."),
    (r"double_blocks\.(\d+)\.txt_attn_q_norm\.", r"transformer_blocks.\1.attn.norm_added_q."),
    (r"double_blocks\.(\d+)\.txt_attn_k_norm\.", r"transformer_blocks.\1.attn.norm_added_k."),
    (r"double_blocks\.(\d+)\.txt_attn_proj\.", r"transformer_blocks.\1.attn.to_add_out."),
    (r"double_blocks\.(\d+)\.txt_mlp\.fc1\.", r"transformer_blocks.\1.ff_context.net.0.proj."),
    (r"double_blocks\.(\d+)\.txt_mlp\.fc2\.", r"transformer_blocks.\1.ff_context.net.2."),
    (r"single_blocks\.(\d+)\.linear2\.", r"single_transformer_blocks.\1.proj_out."),
    (r"single_blocks\.(\d+)\.q_norm\.", r"single_transformer_blocks.\1.attn.norm_q."),
    (r"single_blocks\.(\d+)\.k_norm\.", r"single_transformer_blocks.\1.attn.norm_k."),
    (r"single_blocks\.(\d+)\.modulation\.linear\.", r"single_transformer_blocks.\1.norm.linear."),
    (r"final_layer\.linear\.", "proj_out."),
]
# Fused tensors: original prefix -> the diffusers prefixes of its parts, split on the output axis.
QKV_SPLITS: list[tuple[str, tuple[str, ...]]] = [
    (r"double_blocks\.(\d+)\.img_attn_qkv\.", tuple(rf"transformer_blocks.\1.attn.to_{p}." for p in "qkv")),
    (r"double_blocks\.(\d+)\.txt_attn_qkv\.",
     tuple(rf"transformer_blocks.\1.attn.add_{p}_proj." for p in "qkv")),
    (r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.self_attn_qkv\.",
     tuple(rf"context_embedder.token_refiner.refiner_blocks.\1.attn.to_{p}." for p in "qkv")),
]
LINEAR1 = re.compile(r"single_blocks\.(\d+)\.linear1\.(weight|bias)")
FINAL_ADALN = re.compile(r"final_layer\.adaLN_modulation\.1\.(weight|bias)")


class OriginalDiT(Mapping[str, Any]):
    """diffusers-named zero-argument loaders over an original HunyuanVideo DiT state dict: nothing is read up
    front, and :meth:`shape` answers from the file's metadata.

    The tables are class attributes, so a later release with other names (HunyuanVideo-1.5) is a subclass that
    states its own ``RENAMES`` / ``QKV_SPLITS`` (and ``LINEAR1 = None`` without single-stream blocks)."""

    RENAMES: list[tuple[str, str]] = RENAMES
    QKV_SPLITS: list[tuple[str, tuple[str, ...]]] = QKV_SPLITS
    LINEAR1: re.Pattern | None = LINEAR1
    WHAT = "HunyuanVideo transformer (mp_rank_00_model_states.pt)"

    def __init__(self, source: Mapping[str, Any]) -> None:
        if "img_in.proj.weight" not in source:
            raise UserError(f"the original DiT file has no img_in.proj.weight: not a {self.WHAT}")
        self.source = source
        hidden = int(self._src_shape("img_in.proj.weight")[0])
        # name -> (source key, row slice (start, stop) | "swap" | None)
        self.entries: dict[str, tuple[str, Any]] = {}
        for key in source:
            for name, rows in self._parts(key, hidden):
                if name in self.entries:
                    raise UserError(f"original DiT keys collide on {name!r}")
                self.entries[name] = (key, rows)

    def _src_shape(self, key: str) -> tuple[int, ...]:
        src = self.source
        return tuple(src.shape(key)) if hasattr(src, "shape") else tuple(np.shape(src[key]))

    @classmethod
    def _parts(self, key: str, hidden: int) -> list[tuple[str, Any]]:
        m = self.LINEAR1.fullmatch(key) if self.LINEAR1 is not None else None
        if m:
            b, kind = m.group(1), m.group(2)
            pre = f"single_transformer_blocks.{b}."
            return [(f"{pre}attn.to_q.{kind}", (0, hidden)), (f"{pre}attn.to_k.{kind}", (hidden, 2 * hidden)),
                    (f"{pre}attn.to_v.{kind}", (2 * hidden, 3 * hidden)), (f"{pre}proj_mlp.{kind}", (3 * hidden, None))]
        m = FINAL_ADALN.fullmatch(key)
        if m:
            return [(f"norm_out.linear.{m.group(1)}", "swap")]
        for pattern, targets in self.QKV_SPLITS:
            m = re.match(pattern, key)
            if m:
                rest = key[m.end():]
                return [(m.expand(t) + rest, (i * hidden, (i + 1) * hidden)) for i, t in enumerate(targets)]
        for pattern, target in self.RENAMES:
            m = re.match(pattern, key)
            if m:
                return [(m.expand(target) + key[m.end():], None)]
        return [(key, None)]  # unknown: reported as unexpected by the conversion

    @classmethod
    def lora_targets(cls, name: str) -> Any:
        """An original module name (``double_blocks.0.img_attn_qkv``) -> its diffusers module, or for a fused or
        swapped one the pieces ``[(module, i, n)]`` its output rows fill in order (:mod:`vidax_core.lora.names`):
        the same tables as the checkpoint's own split, so an adapter lands where its base weight does."""
        parts = cls._parts(name + ".weight", 1)
        if len(parts) == 1 and parts[0][1] is None:
            return parts[0][0][: -len(".weight")]
        if len(parts) == 1 and parts[0][1] == "swap":  # (shift, scale) rows -> (scale, shift)
            module = parts[0][0][: -len(".weight")]
            return [(module, 1, 2), (module, 0, 2)]
        return [(p[: -len(".weight")], 0, 1) for p, _ in parts]

    def __getitem__(self, name: str) -> Callable[[], np.ndarray]:
        key, rows = self.entries[name]

        def load():
            w = np.asarray(self.source[key])
            if rows == "swap":  # (shift, scale) -> (scale, shift)
                half = w.shape[0] // 2
                return np.concatenate([w[half:], w[:half]], axis=0)
            return w if rows is None else w[rows[0]:rows[1]]

        return load

    def shape(self, name: str) -> tuple[int, ...]:
        key, rows = self.entries[name]
        s = self._src_shape(key)
        if rows is None or rows == "swap":
            return s
        stop = s[0] if rows[1] is None else rows[1]
        return (stop - rows[0],) + s[1:]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def tensor_shape(tensors: Mapping[str, Any], key: str) -> tuple[int, ...]:
    """The shape of one tensor of a lazy reader (``shape(key)``) or a dict of arrays / zero-arg loaders."""
    if hasattr(tensors, "shape"):
        return tuple(tensors.shape(key))
    v = tensors[key]
    return tuple(np.shape(v() if callable(v) else v))


def common_dit_config(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys the 1.0 and 1.5 DiTs read off the same (diffusers-named) shapes: patch embedding, heads,
    double-block and refiner counts, MLP ratio, text width; RoPE axes and theta are the releases' fixed
    [16, 56, 56] and 256."""

    def shape(k):
        return tensor_shape(tensors, k)

    hidden, in_ch, pt, p = shape("x_embedder.proj.weight")[:4]
    head_dim = shape("transformer_blocks.0.attn.norm_q.weight")[0]
    return dict(
        in_channels=in_ch, out_channels=shape("proj_out.weight")[0] // (pt * p * p),
        num_attention_heads=hidden // head_dim, attention_head_dim=head_dim,
        num_layers=count_blocks(tensors, r"transformer_blocks\.(\d+)\."),
        num_refiner_layers=count_blocks(tensors, r"context_embedder\.token_refiner\.refiner_blocks\.(\d+)\."),
        mlp_ratio=shape("transformer_blocks.0.ff.net.0.proj.weight")[0] / hidden, patch_size=p, patch_size_t=pt,
        qk_norm="rms_norm", text_embed_dim=shape("context_embedder.proj_in.weight")[1], rope_theta=256.0,
        rope_axes_dim=[16, 56, 56],
    )


def count_blocks(tensors: Mapping[str, Any], pattern: str) -> int:
    """How many distinct block indices (``pattern``'s group 1, matched at the key's start) the keys hold."""
    return len({m.group(1) for k in tensors if (m := re.match(pattern, k))})


def dit_config(tensors: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The diffusers ``transformer/config.json`` of an original DiT, from its (diffusers-named) shapes; RoPE axes
    are the release's fixed [16, 56, 56] unless ``overrides`` say otherwise."""
    cfg = dict(
        common_dit_config(tensors), _class_name="HunyuanVideoTransformer3DModel",
        num_single_layers=count_blocks(tensors, r"single_transformer_blocks\.(\d+)\."),
        guidance_embeds="time_text_embed.guidance_embedder.linear_1.weight" in tensors,
        pooled_projection_dim=tensor_shape(tensors, "time_text_embed.text_embedder.linear_1.weight")[1],
        image_condition_type=None,
    )
    cfg.update(overrides or {})
    return cfg


def vae_config(original: Mapping[str, Any]) -> dict[str, Any]:
    """diffusers ``AutoencoderKLHunyuanVideo`` config from the release's ``AutoencoderKLCausal3D`` config.json."""
    keep = ("in_channels", "out_channels", "latent_channels", "block_out_channels", "layers_per_block", "act_fn",
            "norm_num_groups", "scaling_factor", "mid_block_add_attention")
    cfg = {k: original[k] for k in keep if k in original}
    cfg["_class_name"] = "AutoencoderKLHunyuanVideo"
    cfg["temporal_compression_ratio"] = int(original.get("time_compression_ratio", 4))
    cfg["spatial_compression_ratio"] = 8
    return cfg


def find_model_dir(root: str) -> str | None:
    for sub in MODEL_DIRS:
        d = os.path.join(root, sub) if sub else root
        if os.path.isfile(os.path.join(d, DIT_FILE)):
            return d
    return None


class OriginalCheckpoint(Checkpoint):
    """The release folder answering in diffusers terms: transformer and vae from the ``.pt`` files, text encoders
    and tokenizers from ``text_encoder/`` and ``text_encoder_2/``, the published flow-Euler scheduler."""

    FOLDERS = {"tokenizer": "text_encoder", "tokenizer_2": "text_encoder_2", "image_processor": "text_encoder"}

    def __init__(self, root: str, model_dir: str, i2v: bool = False) -> None:
        super().__init__(root)
        self.model_dir = model_dir
        self.i2v = i2v
        self._dit: OriginalDiT | None = None

    def path(self, component: str) -> str:
        if component in ("transformer", "vae"):
            return os.path.join(self.model_dir, "transformers" if component == "transformer" else "vae")
        folder = self.FOLDERS.get(component, component)
        if self.i2v and folder == "text_encoder" and os.path.isdir(os.path.join(self.root, "text_encoder_i2v")):
            folder = "text_encoder_i2v"  # HunyuanVideo-I2V's release: the full LLaVA
        return os.path.join(self.root, folder)

    def has(self, component: str) -> bool:
        return component == "scheduler" or os.path.isdir(self.path(component))

    def _dit_tensors(self) -> OriginalDiT:
        if self._dit is None:
            from vidax_core.io.pth import PthFile

            self._dit = OriginalDiT(PthFile(os.path.join(self.model_dir, DIT_FILE)))
        return self._dit

    def config(self, component: str) -> dict[str, Any]:
        if component == "scheduler":
            return dict(SCHEDULER)
        if component == "transformer":
            extra = os.path.join(self.path("transformer"), "config.json")
            over = read_json_file(extra) if os.path.isfile(extra) else {}
            over = dict(over) if isinstance(over, dict) else {}
            if self.i2v:  # the token_replace release has the text-to-video weights' names and shapes
                over.setdefault("image_condition_type", "token_replace")
            return dit_config(self._dit_tensors(), over)
        if component == "vae":
            return vae_config(super().config("vae"))
        return super().config(component)

    def read_tensors(self, component: str) -> Mapping[str, Any]:
        if component == "transformer":
            return self._dit_tensors()
        if component == "vae":
            from vidax_core.vae.convert_hunyuan import open_original_vae

            pts = sorted(f for f in os.listdir(self.path("vae")) if f.endswith((".pt", ".pth")))
            if not pts:
                raise UserError(f"{self.path('vae')} holds no VAE .pt file (pytorch_model.pt)")
            return open_original_vae(os.path.join(self.path("vae"), pts[0]))
        return super().read_tensors(component)


def open_original(spec: Any, path: str) -> Checkpoint | None:
    model_dir = find_model_dir(path)
    if model_dir is None:
        return None
    i2v = "i2v" in getattr(spec, "tasks", ())
    for sub in ("text_encoder", "text_encoder_2", os.path.join(os.path.relpath(model_dir, path), "vae")):
        if sub == "text_encoder" and i2v and os.path.isdir(os.path.join(path, "text_encoder_i2v")):
            continue
        if not os.path.isdir(os.path.join(path, sub)):
            raise UserError(f"{path} holds the original HunyuanVideo DiT but no {sub}/ folder: the release layout "
                            f"needs text_encoder/, text_encoder_2/ and {os.path.relpath(model_dir, path)}/vae/")
    return OriginalCheckpoint(path, model_dir, i2v)
