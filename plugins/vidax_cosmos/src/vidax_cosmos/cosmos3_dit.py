"""Cosmos3 (Nano, Edge) mixture-of-transformers DiT (diffusers ``Cosmos3OmniTransformer``, video path) in Flax NNX.

The sequence of one guidance branch is ``[text tokens; video tokens]``. Every layer holds two weight sets: the text
("understanding") tokens use ``to_q``/``to_k``/``to_v``/``to_out``, ``mlp`` and their norms and attend causally to
the text only; the video ("generation") tokens use ``add_*_proj``/``to_add_out``, ``mlp_moe_gen`` and the ``*_moe_gen``
norms and attend to every (valid) text token and every video token. There is no routing and no AdaLN.

* Text: the prompt token ids index ``embed_tokens`` (no separate text encoder). A batch row holds one guidance
  branch; its text is right-padded to the batch's length ``L`` and ``text_lengths`` gives the unpadded count, so
  padded tokens are masked as keys and the branch's video positions start after its own text.
* Video: latents ``(B, C, T, H, W)``, H and W zero-padded to the patch, patchified ``(p, p, c)`` per token,
  ``proj_in``; the timestep (``t * timestep_scale``, sinusoid of 256, cos first, ``time_embedder`` in float32) is
  embedded once and added to the tokens of the noisy frames only (``noisy_frames``; conditioning frames get none and
  their output is zero, as the reference leaves them).
* Attention: GQA (``num_key_value_heads`` keys/values repeated to the query heads before the core attention),
  per-head RMS q/k norms (none on the text stream when ``qk_norm_for_text`` is false; Edge's
  ``k_norm_und_for_gen`` normalises the text keys the video queries see), interleaved 3-D mRoPE (rotate-half) from
  :func:`vidax_cosmos.cosmos3_rope.rope_tables`.
* MLP: SwiGLU (``silu``) or squared ReLU (``relu2``, Edge); ``relu2`` configs use Nemotron's RMSNorm (gain
  applied in float32), ``silu`` configs diffusers' RMSNorm (normalised value rounded to the input dtype first).

Blocks live in ONE stacked tree (leading ``layers`` axis) run with ``lax.scan``; the carry is the pair
(text, video). ``pre`` / ``run_block_group`` / ``post`` are the staged forward the offload executor drives.
Logical axes: ``embed``, ``heads``, ``mlp``, ``vocab``, ``layers`` (parameters); ``batch``, ``seq`` (activations:
video tokens are sequence-sharded, text tokens replicated).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.io.arch import from_config_dict
from vidax_core.nn.attention_block import merge_heads, project_heads, rotate
from vidax_core.nn.feedforward import FeedForward, GatedFeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import RMSNorm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import constrain

from .cosmos3_rope import rope_tables

EMBED, HEADS, VOCAB = "embed", "heads", "vocab"
BATCH, SEQ = "batch", "seq"
HIDDEN_ACTS = ("silu", "relu2")


@dataclasses.dataclass(frozen=True)
class Cosmos3DiTConfig:
    """Field names match diffusers' ``config.json`` for ``Cosmos3OmniTransformer`` (defaults: Nano); ``dtype`` is
    the parameter dtype. Sound and action heads (``sound_gen``, ``action_gen``) are not part of the video DiT."""

    attention_bias: bool = False
    head_dim: int = 128
    hidden_size: int = 4096
    intermediate_size: int = 12288
    base_fps: float = 24.0
    enable_fps_modulation: bool = True
    latent_channel: int = 48
    unified_3d_mrope_reset_spatial_ids: bool = True
    unified_3d_mrope_temporal_modality_margin: int = 15000
    latent_patch_size: int = 2
    num_attention_heads: int = 32
    num_hidden_layers: int = 36
    num_key_value_heads: int = 8
    patch_latent_dim: int = 192
    rms_norm_eps: float = 1e-6
    rope_scaling: Any = None
    rope_theta: float = 5000000.0
    timestep_scale: float = 0.001
    vocab_size: int = 151936
    hidden_act: str = "silu"
    qk_norm_for_text: bool = True
    use_und_k_norm_for_gen: bool = False
    rope_axes_dim: Any = None
    temporal_compression_factor: int = 4
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        axes = self.rope_axes_dim
        if axes is None:
            axes = (self.rope_scaling or {}).get("mrope_section", (24, 20, 20))
        object.__setattr__(self, "rope_axes_dim", tuple(int(a) for a in axes))
        if self.hidden_act not in HIDDEN_ACTS:
            raise ValueError(f"hidden_act={self.hidden_act!r}: Cosmos3 has {' or '.join(HIDDEN_ACTS)}")
        if len(self.rope_axes_dim) != 3 or sum(self.rope_axes_dim) != self.head_dim // 2:
            raise ValueError(f"rope_axes_dim {self.rope_axes_dim} must be 3 sections summing to head_dim/2 = "
                             f"{self.head_dim // 2}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads={self.num_key_value_heads}")
        p = self.latent_patch_size
        if self.patch_latent_dim != self.latent_channel * p * p:
            raise ValueError(f"patch_latent_dim={self.patch_latent_dim} must be latent_channel x patch^2 = "
                             f"{self.latent_channel * p * p}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "Cosmos3DiTConfig":
        """From the transformer's ``config.json``; its ``dtype`` entry (the storage dtype diffusers' loader reads)
        is not the parameter-dtype policy, so only ``overrides`` set ``dtype``."""
        return from_config_dict(cls, {k: v for k, v in config.items() if k != "dtype"}, **overrides)

    def build_fields(self) -> dict[str, Any]:
        """What the denoiser build reads of this architecture (``FamilyPlugin.dit_build``): H and W are zero-padded
        to the patch, the output cropped."""
        p = self.latent_patch_size
        return {"in_channels": self.latent_channel, "heads": self.num_attention_heads, "patch_size": (1, p, p),
                "block_counts": {"blocks": self.num_hidden_layers}, "pads_to_patch": True}

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def nemotron_norms(self) -> bool:
        """Edge's Nemotron RMSNorm goes with its relu^2 MLP (diffusers picks the norm from ``hidden_act``)."""
        return self.hidden_act == "relu2"

    @property
    def has_k_norm_und_for_gen(self) -> bool:
        return self.use_und_k_norm_for_gen and not self.qk_norm_for_text


def _norm(cfg: Cosmos3DiTConfig, dim: int, names=(None,)) -> RMSNorm:
    """diffusers RMSNorm rounds the normalised value to the input dtype before its gain; Nemotron's does not."""
    return RMSNorm(dim, names, eps=cfg.rms_norm_eps, scale_in_input_dtype=not cfg.nemotron_norms)


def _mlp(cfg: Cosmos3DiTConfig, rngs: nnx.Rngs) -> nnx.Module:
    if cfg.hidden_act == "relu2":
        return FeedForward(cfg.hidden_size, cfg.intermediate_size, dtype=cfg.dtype, rngs=rngs, bias=False,
                           activation="relu2")
    return GatedFeedForward(cfg.hidden_size, cfg.intermediate_size, dtype=cfg.dtype, rngs=rngs, bias=False)


class Cosmos3Attention(nnx.Module):
    """The packed two-pathway attention: text q/k/v/out and video q/k/v/out projections, per-head norms."""

    def __init__(self, cfg: Cosmos3DiTConfig, *, rngs: nnx.Rngs):
        d, dt, b = cfg.hidden_size, cfg.dtype, cfg.attention_bias
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        lin = lambda i, o, names: Linear(i, o, names, dtype=dt, rngs=rngs, bias=b)  # noqa: E731
        self.to_q, self.to_k, self.to_v = (lin(d, n, (EMBED, HEADS)) for n in (cfg.q_dim, cfg.kv_dim, cfg.kv_dim))
        self.to_out = lin(cfg.q_dim, d, (HEADS, EMBED))
        self.add_q_proj, self.add_k_proj, self.add_v_proj = (
            lin(d, n, (EMBED, HEADS)) for n in (cfg.q_dim, cfg.kv_dim, cfg.kv_dim))
        self.to_add_out = lin(cfg.q_dim, d, (HEADS, EMBED))
        hd = cfg.head_dim
        self.norm_q = _norm(cfg, hd) if cfg.qk_norm_for_text else None
        self.norm_k = _norm(cfg, hd) if cfg.qk_norm_for_text else None
        self.k_norm_und_for_gen = _norm(cfg, hd) if cfg.has_k_norm_und_for_gen else None
        self.norm_added_q = _norm(cfg, hd)
        self.norm_added_k = _norm(cfg, hd)

    def _expand(self, x: jax.Array) -> jax.Array:
        """GQA: key/value head j serves query heads j*g .. j*g+g-1 (torch ``enable_gqa``)."""
        return jnp.repeat(x, self.heads // self.kv_heads, axis=2)

    def __call__(self, txt, vid, txt_rope, vid_rope, txt_mask):
        """txt (B, L, D) replicated, vid (B, N, D) sequence-sharded; ropes (B, S, 1, hd/2) cos/sin pairs;
        txt_mask (B, L) bool (False on padding). Returns (text out, video out)."""
        t_names, v_names = (BATCH, None, HEADS), (BATCH, SEQ, HEADS)
        q_t = project_heads(self.to_q, self.norm_q, txt, t_names, self.heads)
        k_t = project_heads(self.to_k, self.norm_k, txt, t_names, self.kv_heads)
        v_t = project_heads(self.to_v, None, txt, t_names, self.kv_heads)
        q_v = project_heads(self.add_q_proj, self.norm_added_q, vid, v_names, self.heads)
        k_v = project_heads(self.add_k_proj, self.norm_added_k, vid, v_names, self.kv_heads)
        v_v = project_heads(self.add_v_proj, None, vid, v_names, self.kv_heads)
        k_t_gen = None
        if self.k_norm_und_for_gen is not None:
            k_t_gen = rotate(self.k_norm_und_for_gen(k_t).astype(k_t.dtype), txt_rope, "rotate_half")
        q_t, k_t = rotate(q_t, txt_rope, "rotate_half"), rotate(k_t, txt_rope, "rotate_half")
        q_v, k_v = rotate(q_v, vid_rope, "rotate_half"), rotate(k_v, vid_rope, "rotate_half")
        k_t, v_t, k_v, v_v = (self._expand(a) for a in (k_t, v_t, k_v, v_v))
        # video queries see [text; video] keys (text keys as normed for them); text rows are causal over text
        k_gen = k_t if k_t_gen is None else self._expand(k_t_gen)
        o_t, o_v = ulysses.joint_attention((q_t, k_gen, v_t), (q_v, k_v, v_v), txt_mask=txt_mask, text_causal=True)
        if k_t_gen is not None:  # the text rows above used the video-side text keys: redo them with their own
            o_t = ulysses.replicated_attention(q_t, k_t, v_t, kv_mask=txt_mask, causal=True)
        o_t = constrain(merge_heads(o_t), t_names)
        o_v = constrain(merge_heads(o_v), v_names)
        return (constrain(self.to_out(o_t), (BATCH, None, EMBED)),
                constrain(self.to_add_out(o_v), (BATCH, SEQ, EMBED)))


class Cosmos3Block(nnx.Module):
    """Pre-norm attention + MLP, one weight set per stream (``*_moe_gen`` for the video tokens)."""

    def __init__(self, cfg: Cosmos3DiTConfig, *, rngs: nnx.Rngs):
        d = cfg.hidden_size
        self.input_layernorm = _norm(cfg, d, (EMBED,))
        self.input_layernorm_moe_gen = _norm(cfg, d, (EMBED,))
        self.self_attn = Cosmos3Attention(cfg, rngs=rngs)
        self.post_attention_layernorm = _norm(cfg, d, (EMBED,))
        self.post_attention_layernorm_moe_gen = _norm(cfg, d, (EMBED,))
        self.mlp = _mlp(cfg, rngs)
        self.mlp_moe_gen = _mlp(cfg, rngs)

    def __call__(self, x, txt_rope, vid_rope, txt_mask):
        txt, vid = x
        txt = constrain(txt, (BATCH, None, EMBED))
        vid = constrain(vid, (BATCH, SEQ, EMBED))
        a_t, a_v = self.self_attn(self.input_layernorm(txt), self.input_layernorm_moe_gen(vid), txt_rope, vid_rope,
                                  txt_mask)
        txt, vid = txt + a_t, vid + a_v
        txt = txt + self.mlp(self.post_attention_layernorm(txt), None)
        vid = vid + self.mlp_moe_gen(self.post_attention_layernorm_moe_gen(vid))
        return constrain(txt, (BATCH, None, EMBED)), constrain(vid, (BATCH, SEQ, EMBED))


class Cosmos3DiT(nnx.Module):
    """The Cosmos3 video denoiser: ``(latents, timestep, input_ids, text_lengths=, noisy_frames=, fps=)`` ->
    velocity ``(B, latent_channel, T, H, W)`` float32.

    ``latents`` (B, C, T, H, W); ``timestep`` (B,) in the scheduler's units (0..1000; ``timestep_scale`` applied
    here); ``input_ids`` (B, L) int token ids, right-padded; ``text_lengths`` (B,) unpadded counts (default L);
    ``noisy_frames`` (B, T): 1 for frames being denoised, 0 for conditioning frames (default all 1); ``fps`` (a number,
    or an array whose first entry is it, or None): the pipeline's fps for the mRoPE temporal modulation."""

    block_groups = ("blocks",)

    def __init__(self, cfg: Cosmos3DiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, dt = cfg.hidden_size, cfg.dtype
        self.embed_tokens = param(jax.random.normal(rngs.params(), (cfg.vocab_size, d), dt) * 0.02, (VOCAB, EMBED))
        self.proj_in = Linear(cfg.patch_latent_dim, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.time_embedder = TimestepEmbedding(256, d, rngs=rngs)  # kept in float32 (diffusers _keep_in_fp32)
        self.blocks = stacked(lambda r: Cosmos3Block(cfg, rngs=r), cfg.num_hidden_layers, rngs)
        self.norm_moe_gen = _norm(cfg, d, (EMBED,))
        self.proj_out = Linear(d, cfg.patch_latent_dim, (EMBED, None), dtype=dt, rngs=rngs)

    # -- pieces ---------------------------------------------------------------------------------------------------

    def _patch(self, latents):
        p = self.cfg.latent_patch_size
        _, _, t, h, w = latents.shape
        pad = ((0, 0), (0, 0), (0, 0), (0, -h % p), (0, -w % p))
        x = jnp.pad(latents, pad) if any(b for _, b in pad) else latents
        return patchify(x, (1, p, p), order="thwc")

    def pre(self, latents, timestep, context, *, text_lengths=None, noisy_frames=None, fps=None):
        """Embeddings and rope tables -> ((text, video), aux)."""
        cfg, dt = self.cfg, self.cfg.dtype
        b, _, t, _, _ = latents.shape
        ids = jnp.asarray(context, jnp.int32)
        n_txt = ids.shape[1]
        lengths = jnp.full((b,), n_txt, jnp.int32) if text_lengths is None else jnp.asarray(text_lengths, jnp.int32)
        txt = constrain(jnp.take(self.embed_tokens[...], ids, axis=0).astype(dt), (BATCH, None, EMBED))
        tokens, grid = self._patch(latents.astype(dt))
        vid = self.proj_in(tokens)
        tt = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,)) * cfg.timestep_scale
        temb = self.time_embedder(timestep_embedding(tt, 256, flip_sin_to_cos=True, downscale_freq_shift=0))
        noisy = jnp.ones((b, t), dt) if noisy_frames is None else jnp.asarray(noisy_frames).astype(dt)
        per_token = jnp.repeat(noisy, grid[1] * grid[2], axis=1)[..., None]  # (B, N, 1)
        vid = constrain(vid + per_token * temb.astype(dt)[:, None, :], (BATCH, SEQ, EMBED))
        txt_rope, vid_rope = rope_tables(cfg, n_txt, lengths, grid, fps)
        txt_rope = tuple(constrain(a[:, :, None, :], (BATCH, None, None, None)) for a in txt_rope)
        vid_rope = tuple(constrain(a[:, :, None, :], (BATCH, SEQ, None, None)) for a in vid_rope)
        txt_mask = jnp.arange(n_txt)[None, :] < lengths[:, None]
        aux = {"txt_rope": txt_rope, "vid_rope": vid_rope, "txt_mask": txt_mask, "noisy": noisy}
        return (txt, vid), aux

    @staticmethod
    def run_block_group(name, graphdef, state, x, aux):
        if name != "blocks":
            raise KeyError(f"Cosmos3 has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux["txt_rope"], aux["vid_rope"], aux["txt_mask"])

    def post(self, x, aux, latent_shape):
        """Video stream -> final norm, ``proj_out``, unpatchify, crop; zero at conditioning frames."""
        cfg = self.cfg
        p = cfg.latent_patch_size
        _, vid = x
        t, h, w = latent_shape[-3:]
        y = self.proj_out(self.norm_moe_gen(vid)).astype(jnp.float32)
        out = unpatchify(y, (t, -(-h // p), -(-w // p)), (1, p, p), order="thwc")
        out = out[..., :h, :w]
        return out * aux["noisy"].astype(jnp.float32)[:, None, :, None, None]

    def __call__(self, latents, timestep, context, *, text_lengths=None, noisy_frames=None, fps=None):
        x, aux = self.pre(latents, timestep, context, text_lengths=text_lengths, noisy_frames=noisy_frames, fps=fps)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)
