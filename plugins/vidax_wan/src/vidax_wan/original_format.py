"""Wan-AI original release checkpoints (the ``Wan2.x`` repositories' own files) -> vidax models.

The original files name their tensors after the reference code (``wan/modules/*.py``), not after diffusers. Each
loader here renames the keys to the diffusers / transformers layout and then runs the ordinary conversion table
(``DIT_RULES``, ``VAE_RULES``, ``VAE22_RULES``, ``UMT5_RULES``), so there is ONE path from names to vidax params and
the original format can never drift from the diffusers one. The renames are exactly diffusers'
``scripts/convert_wan_to_diffusers.py`` (``TRANSFORMER_KEYS_RENAME_DICT``, ``convert_vae``, ``convert_vae_22``); the
UMT5 rename follows ``wan/modules/t5.py`` (diffusers downloads ``google/umt5-xxl`` instead of converting it).

* DiT ``diffusion_pytorch_model*.safetensors``: sequential substring replacement, as the reference script does
  (``self_attn.q`` -> ``attn1.to_q``, ``blocks.N.modulation`` -> ``scale_shift_table``, the ``norm2``/``norm3`` swap,
  I2V's ``cross_attn.k_img`` -> ``attn2.add_k_proj``, ``img_emb.proj.N`` -> ``condition_embedder.image_embedder``...).
* ``Wan2.1_VAE.pth``: ``residual.{0,2,3,6}`` -> ``norm1/conv1/norm2/conv2``, ``middle.{0,1,2}`` -> mid block, ``head``
  -> ``norm_out/conv_out``, ``conv1/conv2`` -> ``quant_conv/post_quant_conv``; the decoder's flat ``upsamples.K``
  list becomes ``up_blocks.{K // (R + 2)}`` (R + 1 resnets then one upsampler per stage, R = ``num_res_blocks``;
  the reference script hard-codes R = 2).
* ``Wan2.2_VAE.pth``: nested ``downsamples.I.downsamples.J`` / ``upsamples.I.upsamples.J`` -> ``resnets.J`` or the
  block's ``downsampler`` / ``upsampler``.
* ``models_t5_umt5-xxl-enc-bf16.pth``: ``token_embedding`` -> ``shared``, ``blocks.N.attn.{q,k,v,o}``,
  ``blocks.N.pos_embedding.embedding`` (per-layer relative bias), ``norm1/norm2``, ``ffn.gate.0`` (the GELU'd
  branch) / ``ffn.fc1`` / ``ffn.fc2`` -> ``wi_0 / wi_1 / wo``, ``norm`` -> ``encoder.final_layer_norm``.
* ``models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`` (Wan2.1 I2V): the ``visual.*`` tower of
  ``wan/modules/clip.py`` -> transformers ``CLIPVisionModel`` names: ``patch_embedding`` / ``cls_embedding``
  (1, 1, D) / ``pos_embedding`` (1, L, D) -> ``embeddings.*`` (flattened), ``pre_norm`` / ``post_norm`` ->
  ``pre_layrnorm`` / ``post_layernorm``, ``transformer.N.{norm1, norm2, attn.proj, mlp.0, mlp.2}`` ->
  ``encoder.layers.N.{layer_norm1, layer_norm2, self_attn.out_proj, mlp.fc1, mlp.fc2}``, and the fused
  ``attn.to_qkv`` (3D, D) split into ``q_proj / k_proj / v_proj`` (a transform, done lazily on access). The text
  tower (``textual.*``), ``log_scale`` and the ``visual.head`` projection are not used (Wan reads the penultimate
  block's output) and are dropped.

Values are passed through untouched (arrays or lazy loaders), so sharded safetensors and ``vidax_core.io.pth``
mappings stay lazy. Conversion errors name the ORIGINAL keys.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from vidax_core.io.checkpoint import Checkpoint, TensorSource
from vidax_core.io.convert import ConversionError
from vidax_core.errors import UserError
from vidax_core.io.renamed import RenamedTensors
from vidax_core.wan_dit.original import DIT_RENAME, dit_key, image_fields  # noqa: F401 - the DiT's renames: core
from vidax_core.vae.wan_original import (  # the VAE half of the original layout lives in the core
    VAE21_FILE,
    VAE22_FILE,
    regex_rename,
    tensor_shape,
    vae_config_from_tensors,
    vae_key,
)

# --------------------------------------------------------------------------------------------------------------
# UMT5 (the VAE renames: vidax_core.vae.wan_original)


_T5_BLOCK = r"blocks\.(\d+)\."
_T5_RULES: tuple[tuple[str, Callable[[re.Match], str]], ...] = (
    (r"token_embedding\.weight", lambda m: "shared.weight"),
    (_T5_BLOCK + r"attn\.(q|k|v|o)\.weight", lambda m: f"encoder.block.{m[1]}.layer.0.SelfAttention.{m[2]}.weight"),
    (_T5_BLOCK + r"pos_embedding\.embedding\.weight",
     lambda m: f"encoder.block.{m[1]}.layer.0.SelfAttention.relative_attention_bias.weight"),
    (_T5_BLOCK + r"norm(1|2)\.weight", lambda m: f"encoder.block.{m[1]}.layer.{int(m[2]) - 1}.layer_norm.weight"),
    (_T5_BLOCK + r"ffn\.(gate\.0|fc1|fc2)\.weight",
     lambda m: f"encoder.block.{m[1]}.layer.1.DenseReluDense.{_T5_FFN[m[2]]}.weight"),
    (r"norm\.weight", lambda m: "encoder.final_layer_norm.weight"),
)
_T5_FFN = {"gate.0": "wi_0", "fc1": "wi_1", "fc2": "wo"}


def umt5_key(key: str) -> str:
    """Original Wan ``T5Encoder`` (umt5-xxl) key -> transformers ``UMT5EncoderModel`` key."""
    return regex_rename(key, _T5_RULES)


# --------------------------------------------------------------------------------------------------------------
# renaming + loading


def rename(tensors: Mapping[str, Any], key_fn: Callable[[str], str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(renamed tensors, new key -> original key); values are untouched (arrays or lazy loaders)."""
    out: dict[str, Any] = {}
    back: dict[str, str] = {}
    for key, value in tensors.items():
        new = key_fn(key)
        if new in out:
            raise ValueError(f"original checkpoint keys {back[new]!r} and {key!r} both map to {new!r}")
        out[new], back[new] = value, key
    return out, back


def _load(loader: Callable[..., Any], cfg: Any, tensors: Mapping[str, Any], key_fn, **kw: Any) -> Any:
    renamed, back = rename(tensors, key_fn)
    try:
        return loader(cfg, renamed, **kw)
    except ConversionError as err:  # report the keys as they are written in the user's file

        def orig(item: str) -> str:
            head, _, tail = item.partition(" ")
            return back.get(head, head) + (" " + tail if tail else "")

        raise ConversionError(
            f"{err.args[0].split(' does not match')[0].removeprefix('checkpoint for ')} (original Wan format)",
            err.missing, [orig(u) for u in err.unexpected], [orig(u) for u in err.mismatched],
        ) from None


def load_dit_original(cfg: Any, tensors: Mapping[str, Any], **kw: Any) -> Any:
    """A Wan DiT from original-layout tensors (``blocks.0.self_attn.q.weight``...); ``kw`` go to ``load_dit``."""
    from vidax_core.wan_dit.keys import load_dit

    return _load(load_dit, cfg, tensors, dit_key, **kw)


def load_vae_original(cfg: Any, tensors: Mapping[str, Any], **kw: Any) -> Any:
    """The Wan 2.1 VAE (``WanVAE``) or, for an ``is_residual`` config, the Wan 2.2 VAE (``WanVAE22``) from an original
    ``Wan2.x_VAE.pth`` state dict; ``kw`` go to ``load_vae`` / ``load_vae22``."""
    if cfg.is_residual:
        from vidax_core.vae.convert_wan22 import load_vae22

        return _load(load_vae22, cfg, tensors, lambda k: vae_key(k, wan22=True), **kw)
    from vidax_core.vae.convert_wan21 import load_vae

    return _load(load_vae, cfg, tensors, lambda k: vae_key(k, num_res_blocks=cfg.num_res_blocks), **kw)


def load_umt5_original(cfg: Any, tensors: Mapping[str, Any]) -> Any:
    """The UMT5 encoder from ``models_t5_umt5-xxl-enc-bf16.pth`` tensors."""
    from vidax_core.encoders.t5 import load_t5

    return _load(load_t5, cfg, tensors, umt5_key)


# --------------------------------------------------------------------------------------------------------------
# A whole original release folder as a vidax checkpoint (``model.checkpoint: <folder>``)
#
# Layout of the Wan-AI repositories (Wan2.1-T2V-1.3B, Wan2.2-TI2V-5B, ...):
#   config.json                                   DiT config (``model_type``, dim, num_heads, ...)
#   diffusion_pytorch_model*.safetensors [+ index] DiT weights
#   high_noise_model/, low_noise_model/           Wan2.2 A14B: one config.json + DiT shards per expert
#   Wan2.1_VAE.pth | Wan2.2_VAE.pth               VAE state dict
#   models_t5_umt5-xxl-enc-bf16.pth               UMT5-XXL encoder state dict
#   google/umt5-xxl/                              tokenizer (tokenizer.json needed)
#   models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth   Wan2.1 I2V only: CLIP ViT-H/14 (+ XLM-R text tower)
#
# Configs the release does not ship (VAE, UMT5, scheduler) are the published ones, with every architecture
# number that the weights determine (widths, depths, channels) read from the tensor shapes, so a tiny model
# written in this layout runs too. Tensors are served under their diffusers names, lazily.

UMT5_FILE = "models_t5_umt5-xxl-enc-bf16.pth"
TOKENIZER_DIR = os.path.join("google", "umt5-xxl")
CLIP_GLOB = "models_clip_*.pth"
CLIP_FILE = "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"
EXPERT_DIRS = ("high_noise_model", "low_noise_model")

#: ``google/umt5-xxl`` (the encoder ``wan/modules/t5.py`` builds as ``umt5_xxl``).
UMT5_XXL_CONFIG: dict[str, Any] = dict(
    vocab_size=256384, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
    dense_act_fn="gelu_new", is_gated_act=True, layer_norm_epsilon=1e-6, model_type="umt5",
)
#: The reference sampler (``FlowUniPCMultistepScheduler``, solver order 2, bh2) as a diffusers scheduler config;
#: ``flow_shift`` per model below (users override with ``sampling.scheduler``).
UNIPC_FLOW_CONFIG: dict[str, Any] = {
    "_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
    "use_flow_sigmas": True, "flow_shift": 5.0, "solver_order": 2, "solver_type": "bh2", "predict_x0": True,
    "lower_order_final": True, "disable_corrector": [], "final_sigmas_type": "zero",
    "timestep_spacing": "linspace", "steps_offset": 0, "beta_schedule": "linear", "beta_start": 0.0001,
    "beta_end": 0.02, "thresholding": False, "use_karras_sigmas": False, "use_exponential_sigmas": False,
    "use_beta_sigmas": False, "use_dynamic_shifting": False, "time_shift_type": "exponential",
}
#: The reference ``sample_shift`` at each model's default resolution (the shipped configs/*.yaml agree).
FLOW_SHIFT = {"wan2.1-t2v-1.3b": 3.0, "wan2.1-t2v-14b": 5.0, "wan2.1-i2v-14b-480p": 3.0,
              "wan2.1-i2v-14b-720p": 5.0, "wan2.2-t2v-a14b": 12.0, "wan2.2-i2v-a14b": 5.0, "wan2.2-ti2v-5b": 5.0}
#: Wan2.2 A14B expert switch (``boundary`` in ``wan/configs/wan_{t2v,i2v}_A14B.py``).
BOUNDARY_RATIO = {"wan2.2-t2v-a14b": 0.875, "wan2.2-i2v-a14b": 0.900}


#: ``clip_xlm_roberta_vit_h_14``'s visual tower (``wan/modules/clip.py``: dim 1280, mlp_ratio 4, 16 heads, 32 layers,
#: patch 14, image 224, ``activation='gelu'`` (exact ``nn.GELU``), LayerNorm eps 1e-5, bias-free patch conv because
#: ``pre_norm=True``) as a transformers ``CLIPVisionConfig``.
WAN21_CLIP_VISION_CONFIG: dict[str, Any] = dict(
    model_type="clip_vision_model", architectures=["CLIPVisionModel"], hidden_size=1280, intermediate_size=5120,
    num_hidden_layers=32, num_attention_heads=16, num_channels=3, image_size=224, patch_size=14, hidden_act="gelu",
    layer_norm_eps=1e-5, projection_dim=1024,
)
#: ViT-H/14's head width (1280 / 16); the head count is the one number the tensor shapes do not give.
CLIP_HEAD_DIM = 80
#: The CLIP preprocessing constants ``wan/modules/clip.py`` uses (``_clip``: mean/std, ``image_size`` 224), in
#: ``CLIPImageProcessor`` terms as the -Diffusers repos ship them (shortest edge 224, center crop 224, bicubic).
WAN21_CLIP_PROCESSOR_CONFIG: dict[str, Any] = dict(
    image_processor_type="CLIPImageProcessor", do_resize=True, size={"shortest_edge": 224}, resample=3,
    do_center_crop=True, crop_size={"height": 224, "width": 224}, do_rescale=True, rescale_factor=1 / 255,
    do_normalize=True, image_mean=[0.48145466, 0.4578275, 0.40821073],
    image_std=[0.26862954, 0.26130258, 0.27577711], do_convert_rgb=True,
)
#: Original CLIP keys that the vision tower does not use: the XLM-RoBERTa text tower, the logit scale and the
#: visual projection ``visual.head`` (Wan reads ``hidden_states[-2]``, before any head).
CLIP_DROP = re.compile(r"textual\..*|log_scale|logit_scale|visual\.head(\..*)?")

_CLIP_BLOCK = re.compile(r"visual\.transformer\.(\d+)\.(.+)")
_CLIP_BLOCK_RENAME = {
    "norm1.weight": "layer_norm1.weight", "norm1.bias": "layer_norm1.bias",
    "norm2.weight": "layer_norm2.weight", "norm2.bias": "layer_norm2.bias",
    "attn.proj.weight": "self_attn.out_proj.weight", "attn.proj.bias": "self_attn.out_proj.bias",
    "mlp.0.weight": "mlp.fc1.weight", "mlp.0.bias": "mlp.fc1.bias",
    "mlp.2.weight": "mlp.fc2.weight", "mlp.2.bias": "mlp.fc2.bias",
}
_CLIP_RENAME = {
    "visual.patch_embedding.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.pre_norm.weight": "vision_model.pre_layrnorm.weight",
    "visual.pre_norm.bias": "vision_model.pre_layrnorm.bias",
    "visual.post_norm.weight": "vision_model.post_layernorm.weight",
    "visual.post_norm.bias": "vision_model.post_layernorm.bias",
}


def _flatten_to(ndim: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(x: np.ndarray) -> np.ndarray:
        return x.reshape(x.shape[-ndim:]) if x.ndim > ndim and all(d == 1 for d in x.shape[:-ndim]) else x

    return fn


def _qkv_part(i: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(x: np.ndarray) -> np.ndarray:
        if x.shape[0] % 3:
            raise UserError(f"CLIP attn.to_qkv has {x.shape[0]} output rows, not a multiple of 3: "
                            "is it the right file?")
        n = x.shape[0] // 3  # ``to_qkv(x).view(b, s, 3, heads, head_dim)``: rows [q | k | v]
        return x[i * n : (i + 1) * n]

    return fn


def clip_keys(key: str) -> list[tuple[str, Callable[[np.ndarray], np.ndarray] | None]]:
    """One original open-clip key -> [(transformers ``CLIPVisionModel`` key, transform or None)]; [] to drop.
    Unknown keys come back unchanged (so the conversion reports them as unexpected, by their original name)."""
    if CLIP_DROP.fullmatch(key):
        return []
    if key in _CLIP_RENAME:
        return [(_CLIP_RENAME[key], None)]
    if key == "visual.cls_embedding":  # (1, 1, D) -> (D,)
        return [("vision_model.embeddings.class_embedding", _flatten_to(1))]
    if key == "visual.pos_embedding":  # (1, L, D) -> (L, D)
        return [("vision_model.embeddings.position_embedding.weight", _flatten_to(2))]
    m = _CLIP_BLOCK.fullmatch(key)
    if m:
        pre, rest = f"vision_model.encoder.layers.{m[1]}.", m[2]
        if rest in _CLIP_BLOCK_RENAME:
            return [(pre + _CLIP_BLOCK_RENAME[rest], None)]
        if rest in ("attn.to_qkv.weight", "attn.to_qkv.bias"):
            kind = rest.rsplit(".", 1)[1]
            return [(f"{pre}self_attn.{p}_proj.{kind}", _qkv_part(i)) for i, p in enumerate("qkv")]
    return [(key, None)]


class ClipVisionTensors(Mapping[str, np.ndarray]):
    """A lazy view of an original Wan CLIP ``.pth`` as a transformers ``CLIPVisionModel`` state dict: renamed keys,
    the fused ``to_qkv`` split into q/k/v and the embeddings flattened on access; text tower and heads dropped."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.original: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray] | None]] = {}
        for key in source:
            for new, fn in clip_keys(key):
                if new in self.original:
                    raise UserError(f"original CLIP keys {self.original[new][0]!r} and {key!r} both map to {new!r}")
                self.original[new] = (key, fn)

    def __getitem__(self, key: str) -> np.ndarray:
        orig, fn = self.original[key]
        value = self.source[orig]
        return value if fn is None else fn(np.asarray(value))

    def nbytes(self, key: str) -> int:
        orig, fn = self.original[key]
        n = self.source.nbytes(orig) if hasattr(self.source, "nbytes") else np.asarray(self.source[orig]).nbytes
        return n // 3 if fn is not None and orig.endswith(("to_qkv.weight", "to_qkv.bias")) else n

    def __iter__(self) -> Iterator[str]:
        return iter(self.original)

    def __len__(self) -> int:
        return len(self.original)


def clip_vision_config_from_tensors(src: Any) -> dict[str, Any]:
    """:data:`WAN21_CLIP_VISION_CONFIG` with the widths, depth, patch and image size read from the visual tensors."""
    dim, _, patch, _ = tensor_shape(src, "visual.patch_embedding.weight")
    seq = tensor_shape(src, "visual.pos_embedding")[-2]
    layers = sorted({int(m[1]) for k in src if (m := _CLIP_BLOCK.fullmatch(k))})
    if not layers or layers != list(range(len(layers))):
        raise UserError("the CLIP .pth has no contiguous visual.transformer.N blocks: "
                        "is it the open-clip ViT-H/14 file?")
    grid = int(round((seq - 1) ** 0.5))
    if grid * grid != seq - 1:
        raise UserError(f"CLIP visual.pos_embedding has {seq} positions, not 1 + a square grid")
    heads = dim // CLIP_HEAD_DIM if dim % CLIP_HEAD_DIM == 0 and dim >= CLIP_HEAD_DIM else 1
    return {**WAN21_CLIP_VISION_CONFIG, "hidden_size": dim, "num_hidden_layers": len(layers),
            "intermediate_size": tensor_shape(src, "visual.transformer.0.mlp.0.weight")[0],
            "num_attention_heads": heads,
            "patch_size": patch, "image_size": grid * patch}


def umt5_config_from_tensors(src: Any) -> dict[str, Any]:
    """umt5-xxl's config with the sizes read from the original ``T5Encoder`` tensors."""
    vocab, d_model = tensor_shape(src, "token_embedding.weight")
    layers = 1 + max(int(m[1]) for k in src if (m := re.fullmatch(r"blocks\.(\d+)\.attn\.q\.weight", k)))
    buckets, heads = tensor_shape(src, "blocks.0.pos_embedding.embedding.weight")
    return {**UMT5_XXL_CONFIG, "vocab_size": vocab, "d_model": d_model, "num_layers": layers, "num_heads": heads,
            "relative_attention_num_buckets": buckets, "d_kv": tensor_shape(src, "blocks.0.attn.q.weight")[0] // heads,
            "d_ff": tensor_shape(src, "blocks.0.ffn.fc1.weight")[0]}


def dit_config(original: Mapping[str, Any], tensors: Any) -> dict[str, Any]:
    """A diffusers ``WanTransformer3DModel`` config from the original ``config.json`` (+ shapes it leaves out)."""
    try:
        dim, heads = int(original["dim"]), int(original["num_heads"])
        cfg: dict[str, Any] = {
            "_class_name": "WanTransformer3DModel", "num_attention_heads": heads, "attention_head_dim": dim // heads,
            "in_channels": int(original["in_dim"]), "out_channels": int(original["out_dim"]),
            "ffn_dim": int(original["ffn_dim"]), "freq_dim": int(original["freq_dim"]),
            "num_layers": int(original["num_layers"]), "eps": float(original.get("eps", 1e-6)),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"original Wan config.json lacks or mangles {exc}: expected dim, num_heads, in_dim, "
                        "out_dim, ffn_dim, freq_dim, num_layers") from None
    cfg["text_dim"] = tensor_shape(tensors, "text_embedding.0.weight")[1]
    cfg["patch_size"] = list(tensor_shape(tensors, "patch_embedding.weight")[2:])
    cfg["cross_attn_norm"] = bool(original.get("cross_attn_norm", True))
    cfg["qk_norm"] = "rms_norm_across_heads" if original.get("qk_norm", True) else None
    cfg["rope_max_seq_len"] = 1024
    return {**cfg, **image_fields(tensors, dim)}  # Wan2.1 I2V / FLF2V: CLIP image tokens


def _json_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object")
    return data


def _dit_dir(root: str) -> str | None:
    """The folder of the (first) DiT's config.json with a ``model_type``: the root, or ``high_noise_model/``."""
    for folder in (root, os.path.join(root, EXPERT_DIRS[0])):
        f = os.path.join(folder, "config.json")
        if os.path.isfile(f):
            try:
                with open(f, encoding="utf-8") as fh:
                    data = json.load(fh)
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and "model_type" in data and "dim" in data:
                return folder
    return None


def is_original_layout(root: str) -> bool:
    """Any of the original release's marker files: a DiT config.json with ``model_type``,
    a Wan VAE .pth, the UMT5 .pth."""
    return (_dit_dir(root) is not None or os.path.isfile(os.path.join(root, VAE21_FILE))
            or os.path.isfile(os.path.join(root, VAE22_FILE)) or os.path.isfile(os.path.join(root, UMT5_FILE)))


class OriginalWanCheckpoint(Checkpoint):
    """An original Wan-AI release folder, answering in diffusers terms (components, configs, tensor names)."""

    def __init__(self, root: str, model_id: str = "", source: str | None = None) -> None:
        self.root, self.source, self.model_id = root, source or root, model_id
        dit = _dit_dir(root)
        vaes = [f for f in (VAE21_FILE, VAE22_FILE) if os.path.isfile(os.path.join(root, f))]
        missing = (([] if dit else ["config.json (DiT, with model_type)"])
                   + ([] if vaes else [f"{VAE21_FILE} or {VAE22_FILE}"]))
        missing += [] if os.path.isfile(os.path.join(root, UMT5_FILE)) else [UMT5_FILE]
        if missing:
            raise UserError(f"checkpoint folder {self.source} looks like an original Wan-AI release but lacks "
                            f"{', '.join(missing)}")
        self._original_cfg = _json_file(os.path.join(dit, "config.json"))
        self.model_type = str(self._original_cfg["model_type"])
        self._paths: dict[str, str] = {"transformer": dit, "text_encoder": os.path.join(root, UMT5_FILE),
                                       "tokenizer": os.path.join(root, TOKENIZER_DIR)}
        low = os.path.join(root, EXPERT_DIRS[1])
        if dit != root and os.path.isfile(os.path.join(low, "config.json")):
            self._paths["transformer_2"] = low
        wan22_vae = VAE22_FILE in vaes and (VAE21_FILE not in vaes or int(self._original_cfg.get("out_dim", 0)) == 48)
        self._paths["vae"] = os.path.join(root, VAE22_FILE if wan22_vae else VAE21_FILE)
        self.wan22_vae = wan22_vae
        clip = sorted(glob.glob(os.path.join(root, CLIP_GLOB)))
        if clip:
            self._paths["image_encoder"] = clip[0]
        self._cache: dict[tuple[str, str], Any] = {}
        experts = "transformer_2" in self._paths
        self.model_index = {
            "_class_name": "WanPipeline" if self.model_type == "t2v" else "WanImageToVideoPipeline",
            "boundary_ratio": BOUNDARY_RATIO.get(model_id, 0.875) if experts else None,
            "expand_timesteps": self.model_type == "ti2v",
            "transformer_2": ["diffusers", "WanTransformer3DModel"] if experts else [None, None],
        }
        self.require("tokenizer")  # a missing tokenizer.json is reported before any weights are read
        if "img_emb.proj.0.weight" in self._dit_source("transformer") and "image_encoder" not in self._paths:
            raise UserError(f"checkpoint folder {self.source} holds a Wan2.1 image-to-video DiT but lacks {CLIP_FILE}")

    # -- Checkpoint API ----------------------------------------------------------------------------------------
    def path(self, component: str) -> str:
        return self._paths.get(component, os.path.join(self.root, component))

    def has(self, component: str) -> bool:
        if component == "image_processor":
            return self.has("image_encoder")
        return component == "scheduler" or (component in self._paths and os.path.exists(self._paths[component]))

    def require(self, component: str) -> str:
        if component == "scheduler":
            return self.root
        if not self.has(component):
            raise UserError(f"original Wan checkpoint {self.source} has no {component} "
                            f"({os.path.relpath(self.path(component), self.root)})")
        path = self.path(component)
        if component == "tokenizer" and not any(os.path.isfile(os.path.join(path, f))
                                                for f in ("tokenizer.json", "spiece.model")):
            raise UserError(f"tokenizer folder {path} has neither tokenizer.json nor spiece.model: "
                            f"fetch one with `hf download google/umt5-xxl tokenizer.json --local-dir {path}`")
        return path

    def config(self, component: str) -> dict[str, Any]:
        if component in ("transformer", "transformer_2"):
            folder = self.require(component)
            return dit_config(_json_file(os.path.join(folder, "config.json")), self._dit_source(component))
        if component == "vae":
            return vae_config_from_tensors(self._pth("vae"), self.wan22_vae)
        if component == "text_encoder":
            return umt5_config_from_tensors(self._pth("text_encoder"))
        if component == "scheduler":
            return {**UNIPC_FLOW_CONFIG, "flow_shift": FLOW_SHIFT.get(self.model_id, 5.0)}
        if component == "tokenizer":
            return _json_file(os.path.join(self.require("tokenizer"), "tokenizer_config.json"))
        if component == "image_encoder":
            return clip_vision_config_from_tensors(self._pth("image_encoder"))
        if component == "image_processor" and self.has("image_encoder"):
            return dict(WAN21_CLIP_PROCESSOR_CONFIG)
        raise UserError(f"original Wan checkpoint {self.source} has no {component} config")

    def weight_files(self, component: str) -> list[str]:
        if component in ("transformer", "transformer_2"):
            return super().weight_files(component)
        return [self.require(component)]

    def read_tensors(self, component: str) -> Any:
        if component in ("transformer", "transformer_2"):
            return RenamedTensors(self._dit_source(component), dit_key)
        if component == "vae":
            cfg = self.config("vae")
            return RenamedTensors(self._pth("vae"), lambda k: vae_key(k, num_res_blocks=cfg["num_res_blocks"],
                                                                       wan22=self.wan22_vae))
        if component == "text_encoder":
            return RenamedTensors(self._pth("text_encoder"), umt5_key)
        if component == "image_encoder":
            return ClipVisionTensors(self._pth("image_encoder"))
        raise UserError(f"original Wan checkpoint {self.source} has no {component} weights")

    # -- sources -----------------------------------------------------------------------------------------------
    def _dit_source(self, component: str) -> TensorSource:
        key = ("dit", component)
        if key not in self._cache:
            self._cache[key] = TensorSource(super().weight_files(component))
        return self._cache[key]

    def _pth(self, component: str) -> Any:
        key = ("pth", component)
        if key not in self._cache:
            from vidax_core.io.pth import PthFile

            self._cache[key] = PthFile(self.require(component))
        return self._cache[key]


def open_original(spec: Any, path: str) -> OriginalWanCheckpoint | None:
    """The ``open_checkpoint`` hook's work: claim ``path`` if it holds original Wan release files."""
    if not is_original_layout(path):
        return None
    return OriginalWanCheckpoint(path, model_id=getattr(spec, "id", ""))
