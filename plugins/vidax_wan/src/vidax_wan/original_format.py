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

Values are passed through untouched (arrays or lazy loaders), so sharded safetensors and ``vidax_core.pth``
mappings stay lazy. Conversion errors name the ORIGINAL keys.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from vidax_core.convert import ConversionError

#: diffusers' ``TRANSFORMER_KEYS_RENAME_DICT``, applied in order with ``str.replace``.
DIT_RENAME: tuple[tuple[str, str], ...] = (
    ("time_embedding.0", "condition_embedder.time_embedder.linear_1"),
    ("time_embedding.2", "condition_embedder.time_embedder.linear_2"),
    ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
    ("text_embedding.2", "condition_embedder.text_embedder.linear_2"),
    ("time_projection.1", "condition_embedder.time_proj"),
    ("head.modulation", "scale_shift_table"),
    ("head.head", "proj_out"),
    ("modulation", "scale_shift_table"),
    ("ffn.0", "ffn.net.0.proj"),
    ("ffn.2", "ffn.net.2"),
    # the original calls its norms norm1, norm3 (cross-attention), norm2 (ffn); diffusers norm1, norm2, norm3
    ("norm2", "norm__placeholder"),
    ("norm3", "norm2"),
    ("norm__placeholder", "norm3"),
    ("img_emb.proj.0", "condition_embedder.image_embedder.norm1"),
    ("img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"),
    ("img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"),
    ("img_emb.proj.4", "condition_embedder.image_embedder.norm2"),
    ("img_emb.emb_pos", "condition_embedder.image_embedder.pos_embed"),
    ("self_attn.q", "attn1.to_q"),
    ("self_attn.k", "attn1.to_k"),
    ("self_attn.v", "attn1.to_v"),
    ("self_attn.o", "attn1.to_out.0"),
    ("self_attn.norm_q", "attn1.norm_q"),
    ("self_attn.norm_k", "attn1.norm_k"),
    ("cross_attn.q", "attn2.to_q"),
    ("cross_attn.k", "attn2.to_k"),
    ("cross_attn.v", "attn2.to_v"),
    ("cross_attn.o", "attn2.to_out.0"),
    ("cross_attn.norm_q", "attn2.norm_q"),
    ("cross_attn.norm_k", "attn2.norm_k"),
    ("attn2.to_k_img", "attn2.add_k_proj"),
    ("attn2.to_v_img", "attn2.add_v_proj"),
    ("attn2.norm_k_img", "attn2.norm_added_k"),
)


def dit_key(key: str) -> str:
    """Original Wan DiT key -> diffusers ``WanTransformer3DModel`` key."""
    for old, new in DIT_RENAME:
        key = key.replace(old, new)
    return key


# --------------------------------------------------------------------------------------------------------------
# VAE


_RESIDUAL = {"residual.0.gamma": "norm1.gamma", "residual.2.weight": "conv1.weight", "residual.2.bias": "conv1.bias",
             "residual.3.gamma": "norm2.gamma", "residual.6.weight": "conv2.weight", "residual.6.bias": "conv2.bias",
             "shortcut.weight": "conv_shortcut.weight", "shortcut.bias": "conv_shortcut.bias"}
_RES = "(" + "|".join(re.escape(k) for k in _RESIDUAL) + ")"
_SIDE = r"(encoder|decoder)\."

_VAE_COMMON: tuple[tuple[str, Callable[[re.Match], str]], ...] = (
    (r"conv1\.(weight|bias)", lambda m: f"quant_conv.{m[1]}"),
    (r"conv2\.(weight|bias)", lambda m: f"post_quant_conv.{m[1]}"),
    (_SIDE + r"conv1\.(weight|bias)", lambda m: f"{m[1]}.conv_in.{m[2]}"),
    (_SIDE + r"head\.0\.gamma", lambda m: f"{m[1]}.norm_out.gamma"),
    (_SIDE + r"head\.2\.(weight|bias)", lambda m: f"{m[1]}.conv_out.{m[2]}"),
    (_SIDE + r"middle\.([02])\." + _RES, lambda m: f"{m[1]}.mid_block.resnets.{int(m[2]) // 2}.{_RESIDUAL[m[3]]}"),
    (_SIDE + r"middle\.1\.(norm\.gamma|(?:to_qkv|proj)\.(?:weight|bias))",
     lambda m: f"{m[1]}.mid_block.attentions.0.{m[2]}"),
)


def _vae21_rules(num_res_blocks: int) -> tuple[tuple[str, Callable[[re.Match], str]], ...]:
    per_stage = num_res_blocks + 2  # decoder: R + 1 resnets, then one upsampler

    def up_res(m: re.Match) -> str:
        k = int(m[1])
        return f"decoder.up_blocks.{k // per_stage}.resnets.{k % per_stage}.{_RESIDUAL[m[2]]}"

    return _VAE_COMMON + (
        (r"encoder\.downsamples\.(\d+)\." + _RES, lambda m: f"encoder.down_blocks.{m[1]}.{_RESIDUAL[m[2]]}"),
        (r"encoder\.downsamples\.(\d+)\.(resample\.1|time_conv)\.(weight|bias)",
         lambda m: f"encoder.down_blocks.{m[1]}.{m[2]}.{m[3]}"),
        (r"decoder\.upsamples\.(\d+)\." + _RES, up_res),
        (r"decoder\.upsamples\.(\d+)\.(resample\.1|time_conv)\.(weight|bias)",
         lambda m: f"decoder.up_blocks.{int(m[1]) // per_stage}.upsamplers.0.{m[2]}.{m[3]}"),
    )


_VAE22_RULES = _VAE_COMMON + (
    (r"encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\." + _RES,
     lambda m: f"encoder.down_blocks.{m[1]}.resnets.{m[2]}.{_RESIDUAL[m[3]]}"),
    (r"encoder\.downsamples\.(\d+)\.downsamples\.\d+\.(resample\.1|time_conv)\.(weight|bias)",
     lambda m: f"encoder.down_blocks.{m[1]}.downsampler.{m[2]}.{m[3]}"),
    (r"decoder\.upsamples\.(\d+)\.upsamples\.(\d+)\." + _RES,
     lambda m: f"decoder.up_blocks.{m[1]}.resnets.{m[2]}.{_RESIDUAL[m[3]]}"),
    (r"decoder\.upsamples\.(\d+)\.upsamples\.\d+\.(resample\.1|time_conv)\.(weight|bias)",
     lambda m: f"decoder.up_blocks.{m[1]}.upsampler.{m[2]}.{m[3]}"),
)


def _regex_rename(key: str, rules) -> str:
    for pattern, repl in rules:
        m = re.fullmatch(pattern, key)
        if m is not None:
            return repl(m)
    return key  # unknown: left as is, so the conversion reports it as unexpected


def vae_key(key: str, *, num_res_blocks: int = 2, wan22: bool = False) -> str:
    """Original ``Wan2.1_VAE.pth`` (or, with ``wan22``, ``Wan2.2_VAE.pth``) key -> diffusers AutoencoderKLWan key."""
    return _regex_rename(key, _VAE22_RULES if wan22 else _vae21_rules(num_res_blocks))


# --------------------------------------------------------------------------------------------------------------
# UMT5


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
    return _regex_rename(key, _T5_RULES)


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
    from .convert_dit import load_dit

    return _load(load_dit, cfg, tensors, dit_key, **kw)


def load_vae_original(cfg: Any, tensors: Mapping[str, Any], **kw: Any) -> Any:
    """The Wan 2.1 VAE (``WanVAE``) or, for an ``is_residual`` config, the Wan 2.2 VAE (``WanVAE22``) from an original
    ``Wan2.x_VAE.pth`` state dict; ``kw`` go to ``load_vae`` / ``load_vae22``."""
    if cfg.is_residual:
        from .convert_vae22 import load_vae22

        return _load(load_vae22, cfg, tensors, lambda k: vae_key(k, wan22=True), **kw)
    from .convert_vae import load_vae

    return _load(load_vae, cfg, tensors, lambda k: vae_key(k, num_res_blocks=cfg.num_res_blocks), **kw)


def load_umt5_original(cfg: Any, tensors: Mapping[str, Any]) -> Any:
    """The UMT5 encoder from ``models_t5_umt5-xxl-enc-bf16.pth`` tensors."""
    from vidax_core.encoders.umt5 import load_umt5

    return _load(load_umt5, cfg, tensors, umt5_key)
