"""The LTX-2.x release files' own configuration -> diffusers config dicts (JAX-free).

Every original LTX-2.x safetensors carries the configuration ltx-core (Lightricks' reference code) builds its
modules from, as JSON under the ``config`` metadata key: ``{"transformer": {...}, "vae": {...}, "audio_vae":
{...}, "vocoder": {...}}`` (each file the sections of its parts). This module reads those sections as ltx-core does
(its key names and its defaults for an absent key) and answers with the config.json dicts of diffusers' classes,
so the diffusers-layout config classes and key tables apply unchanged. What ltx-core fixes in code rather than in
the config (the DiT's patch sizes, norms and activation; the vocoders' activation details) is the published value
diffusers' conversion script writes for the same files; what the tensors show (the DiT's caption projection, the
VAE decoder's timestep conditioning, the vocoder's input width) is read from their names and shapes.

* DiT: ``positional_embedding_theta`` -> ``rope_theta``, ``positional_embedding_max_pos`` -> ``pos_embed_max_pos``
  / ``base_height`` / ``base_width``, ``apply_gated_attention`` / ``cross_attention_adaln`` -> both streams'
  ``gated_attn`` / ``cross_attn_mod``, ``frequencies_precision: float64`` -> ``rope_double_precision``,
  ``av_ca_timestep_scale_multiplier`` -> ``cross_attn_timestep_scale_multiplier``; the 2.3+ feature extractor
  (``caption_proj_before_connector``) means no caption projection in the DiT.
* Connectors: ``connector_*`` (the audio connector's ``audio_connector_*`` falling back to them),
  ``connector_positional_embedding_max_pos`` -> ``connector_rope_base_seq_len``, the DiT's RoPE type and precision
  (theta and register count are ltx-core's class defaults: 10000, and the registers' tensor); widths from Gemma's
  config.
* Video VAE: ltx-core's block lists (``encoder_blocks``: ``res_x`` stages between ``compress_{space,time,all}_res``
  downsamplers; ``decoder_blocks``: ``res_x`` stages between ``compress_{space,time,all}`` upsamplers, listed from
  the output side) -> diffusers' per-block tuples; without block lists, the published LTX-2 VAE.
* Audio VAE: ``model.params.ddconfig`` (``ch`` -> ``base_channels``, ``z_channels`` -> ``latent_channels``...) and
  the STFT / mel preprocessing; vocoder: ``upsample_rates`` -> ``upsample_factors``, ``resblock_*`` ->
  ``resnet_*``, ``upsample_initial_channel`` -> ``hidden_channels``; a ``bwe`` section is LTX-2.3+'s vocoder with
  bandwidth extension.
"""

from __future__ import annotations

from typing import Any, Mapping

from vidax_core.errors import UserError

from .ltx2_vae import PUBLISHED_LTX2_VAE_CONFIG

# ltx-core reads these DiT keys under the same names as diffusers' config.json.
_SAME_DIT_KEYS = {
    "in_channels": 128, "out_channels": 128, "num_attention_heads": 32, "attention_head_dim": 128, "num_layers": 48,
    "cross_attention_dim": 4096, "norm_eps": 1e-6, "audio_num_attention_heads": 32, "audio_attention_head_dim": 64,
    "audio_in_channels": 128, "audio_out_channels": 128, "audio_cross_attention_dim": 2048,
    "timestep_scale_multiplier": 1000, "rope_type": "split", "use_prompt_adaln_single": True, "ff_bias": True,
    "audio_ff_bias": True, "use_keyframes_abs_pos_embedding": False,
}
# What ltx-core's DiT fixes in code (diffusers' conversion writes the same).
_FIXED_DIT = {
    "_class_name": "LTX2VideoTransformer3DModel", "patch_size": 1, "patch_size_t": 1, "audio_patch_size": 1,
    "audio_patch_size_t": 1, "activation_fn": "gelu-approximate", "qk_norm": "rms_norm_across_heads",
    "norm_elementwise_affine": False, "attention_bias": True, "attention_out_bias": True, "causal_offset": 1,
    "vae_scale_factors": (8, 32, 32), "audio_scale_factor": 4, "audio_sampling_rate": 16000, "audio_hop_length": 160,
    # ltx-core can perturb any block's self-attention (spatio-temporal guidance)
    "perturbed_attn": True,
}
# The 2.3+ feature extractor's config keys (ltx-core ``_V2_EXPECTED_CONFIG``): present = per-stream projections.
_V2_KEYS = ("caption_proj_before_connector", "caption_projection_first_linear", "caption_proj_input_norm",
            "caption_projection_second_linear")
#: Gemma-3 12B's (and LTX-2.5's Gemma-4 12B's) width, when no config says it.
CAPTION_CHANNELS = 3840


def section(meta: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    """``meta[name]`` as a dict ({} when absent), or one line naming the file."""
    value = meta.get(name, {})
    if not isinstance(value, dict):
        raise UserError(f"{where}: metadata config '{name}' must be a JSON object: re-download the file")
    return value


def per_modality_projections(t: Mapping[str, Any]) -> bool:
    """Whether the transformer config declares the 2.3+ feature extractor (per-stream projections before the
    connectors), as ltx-core decides it."""
    return any(k in t for k in _V2_KEYS)


def gemma_width(gemma: Mapping[str, Any]) -> int:
    """Gemma's hidden size from its transformers config (the text part of a composite one)."""
    return int(gemma.get("text_config", gemma).get("hidden_size") or CAPTION_CHANNELS)


def dit_config(t: Mapping[str, Any], keys: Any, shape: Any, caption_channels: int = CAPTION_CHANNELS
               ) -> dict[str, Any]:
    """The DiT's ``config.json`` from the metadata's ``transformer`` section; ``keys`` are the DiT's diffusers
    tensor names and ``shape(key)`` their shapes; ``caption_channels`` (Gemma's width) where the DiT has no caption
    projection to read it from."""
    cfg = {k: t.get(k, d) for k, d in _SAME_DIT_KEYS.items()}
    pos = t.get("positional_embedding_max_pos", [20, 2048, 2048])
    audio_pos = t.get("audio_positional_embedding_max_pos", [20])
    gated, cross = bool(t.get("apply_gated_attention", False)), bool(t.get("cross_attention_adaln", False))
    cfg.update(_FIXED_DIT, rope_theta=t.get("positional_embedding_theta", 10000.0), pos_embed_max_pos=pos[0],
               base_height=pos[1], base_width=pos[2], audio_pos_embed_max_pos=audio_pos[0],
               cross_attn_timestep_scale_multiplier=t.get("av_ca_timestep_scale_multiplier", 1),
               rope_double_precision=t.get("frequencies_precision", False) == "float64", gated_attn=gated,
               audio_gated_attn=gated, cross_attn_mod=cross, audio_cross_attn_mod=cross,
               use_prompt_embeddings=not t.get("caption_proj_before_connector", False))
    proj = "caption_projection.linear_1.weight"
    cfg["caption_channels"] = int(shape(proj)[1]) if proj in keys else caption_channels
    return cfg


def connectors_config(t: Mapping[str, Any], gemma: Mapping[str, Any], keys: Any, shape: Any) -> dict[str, Any]:
    """The connectors' ``config.json`` from the transformer section, Gemma's config (its text part's width and
    depth) and the connectors' diffusers tensor names / shapes (register counts, projection biases)."""
    text = gemma.get("text_config", gemma)
    heads, dim, layers = (t.get("connector_num_attention_heads", 30), t.get("connector_attention_head_dim", 128),
                          t.get("connector_num_layers", 2))
    v2 = per_modality_projections(t)
    cfg: dict[str, Any] = {
        "_class_name": "LTX2TextConnectors", "caption_channels": gemma_width(gemma),
        "text_proj_in_factor": int(text.get("num_hidden_layers", 0)) + 1,
        "connector_rope_base_seq_len": t.get("connector_positional_embedding_max_pos", [1])[0],
        "rope_theta": 10000.0,  # ltx-core's connector default; its configurator passes no theta
        "rope_double_precision": t.get("frequencies_precision", False) == "float64",
        "rope_type": t.get("rope_type", "split"), "causal_temporal_positioning": False,
        "per_modality_projections": v2, "proj_bias": v2,
    }
    if v2:  # the per-stream projections output the DiT's stream widths (ltx-core's FeatureExtractorV2)
        cfg["video_hidden_dim"] = t.get("num_attention_heads", 32) * t.get("attention_head_dim", 128)
        cfg["audio_hidden_dim"] = t.get("audio_num_attention_heads", 32) * t.get("audio_attention_head_dim", 64)
    for name, prefix in (("video", "connector_"), ("audio", "audio_connector_")):
        regs = f"{name}_connector.learnable_registers"
        cfg.update({
            f"{name}_connector_num_attention_heads": t.get(f"{prefix}num_attention_heads", heads),
            f"{name}_connector_attention_head_dim": t.get(f"{prefix}attention_head_dim", dim),
            f"{name}_connector_num_layers": t.get(f"{prefix}num_layers", layers),
            f"{name}_connector_num_learnable_registers": int(shape(regs)[0]) if regs in keys else None,
            f"{name}_gated_attn": bool(t.get("connector_apply_gated_attention", False)),
        })
    return cfg


CONV_VAE = "CausalVideoAutoencoder"  # ltx-core's class of the convolutional VAE (its other one has a diffusion decoder)
# ltx-core block names -> diffusers' down / up sampling kinds
_DOWN = {"compress_space_res": "spatial", "compress_time_res": "temporal", "compress_all_res": "spatiotemporal"}
_UP = {"compress_space": "spatial", "compress_time": "temporal", "compress_all": "spatiotemporal"}
_RATIOS = {"spatial": (1, 2), "temporal": (2, 1), "spatiotemporal": (2, 2)}


def _blocks(raw: Any, where: str, what: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for item in raw if isinstance(raw, list) else [None]:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
            raise UserError(f"{where}: vae {what} must be a list of [name, params] pairs: re-download the file")
        params = {"num_layers": item[1]} if isinstance(item[1], int) else item[1]
        if not isinstance(params, dict):
            raise UserError(f"{where}: vae {what} entry {item[0]!r} has params {item[1]!r}")
        out.append((item[0], params))
    return out


def _stages(blocks: list[tuple[str, dict[str, Any]]], kinds: Mapping[str, str], where: str, what: str
            ) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """``res_x`` stages alternating with resamplers (``res_x, s, res_x, ..., s, res_x``) -> (res_x params,
    (kind, params) of each resampler), or one line naming what does not fit that pattern."""
    names = [n for n, _ in blocks]
    ok = len(blocks) % 2 == 1 and all(n == "res_x" for n in names[::2]) and all(n in kinds for n in names[1::2])
    if not ok:
        raise UserError(f"{where}: vae {what} {names} are not res_x stages between {'/'.join(kinds)} blocks, the "
                        "LTX-2 VAE layout vidax reads")
    return [p for _, p in blocks[::2]], [(kinds[n], p) for n, p in blocks[1::2]]


def vae_config(v: Mapping[str, Any], keys: Any, where: str) -> dict[str, Any]:
    """The video VAE's ``config.json`` from the metadata's ``vae`` section; ``keys`` are the VAE's diffusers tensor
    names (the decoder's timestep conditioning is read from them)."""
    timestep = any(k.startswith("decoder.time_embedder.") for k in keys)
    if v.get("_class_name", CONV_VAE) != CONV_VAE:
        raise UserError(f"{where}: vae {v['_class_name']} is not the convolutional LTX-2 VAE ({CONV_VAE}); the "
                        "release's -video-vae-conv- file is")
    if "encoder_blocks" not in v and "decoder_blocks" not in v:
        return dict(PUBLISHED_LTX2_VAE_CONFIG, _class_name="AutoencoderKLLTX2Video", timestep_conditioning=timestep)
    for key, want in (("norm_layer", "pixel_norm"), ("latent_log_var", "uniform"), ("dims", 3)):
        if v.get(key, want) != want:
            raise UserError(f"{where}: vae {key}={v[key]!r} is not the LTX-2 VAE's {want!r}")
    latent, patch = int(v.get("latent_channels", 128)), int(v.get("patch_size", 4))
    res, down = _stages(_blocks(v.get("encoder_blocks"), where, "encoder_blocks"), _DOWN, where, "encoder_blocks")
    widths, ch = [], latent
    for _, p in down:
        ch *= int(p.get("multiplier", 2))
        widths.append(ch)
    dres, up = _stages(_blocks(v.get("decoder_blocks"), where, "decoder_blocks"), _UP, where, "decoder_blocks")
    factors = [int(p.get("multiplier", 1)) for _, p in up]
    ch, dwidths = int(v.get("decoder_base_channels", 128)), []
    for f in factors:  # listed from the output side: each upsampler's input is its output times its factor
        ch *= f
        dwidths.append(ch)
    s_ratio = patch * 2 ** sum(_RATIOS[k][1] == 2 for k, _ in down)
    t_ratio = 2 ** sum(_RATIOS[k][0] == 2 for k, _ in down)
    return {
        "_class_name": "AutoencoderKLLTX2Video", "in_channels": 3, "out_channels": int(v.get("out_channels", 3)),
        "latent_channels": latent, "block_out_channels": tuple(widths),
        "down_block_types": ("LTX2VideoDownBlock3D",) * len(down),
        "layers_per_block": tuple(int(p["num_layers"]) for p in res),
        "spatio_temporal_scaling": (True,) * len(down), "downsample_type": tuple(k for k, _ in down),
        "decoder_block_out_channels": tuple(dwidths),
        "decoder_layers_per_block": tuple(int(p["num_layers"]) for p in dres),
        "decoder_inject_noise": tuple(bool(p.get("inject_noise", False)) for p in dres),
        "decoder_spatio_temporal_scaling": (True,) * len(up),
        "upsample_type": tuple(k for k, _ in reversed(up)),  # diffusers indexes it in decoding order
        "upsample_residual": tuple(bool(p.get("residual", False)) for _, p in up),
        "upsample_factor": tuple(factors), "timestep_conditioning": timestep, "patch_size": patch, "patch_size_t": 1,
        "resnet_norm_eps": 1e-6, "scaling_factor": 1.0, "encoder_causal": True,
        "decoder_causal": bool(v.get("causal_decoder", False)),
        "encoder_spatial_padding_mode": v.get("encoder_spatial_padding_mode", "zeros"),
        "decoder_spatial_padding_mode": v.get("spatial_padding_mode", "reflect"),
        "spatial_compression_ratio": s_ratio, "temporal_compression_ratio": t_ratio,
    }


def audio_vae_config(a: Mapping[str, Any]) -> dict[str, Any]:
    """The audio VAE's ``config.json`` from the metadata's ``audio_vae`` section."""
    params = (a.get("model") or {}).get("params") or {}
    dd = params.get("ddconfig") or {}
    pre = a.get("preprocessing") or {}
    stft, mel = pre.get("stft") or {}, pre.get("mel") or {}
    attn = dd.get("attn_resolutions", (8, 16, 32))
    return {
        "_class_name": "AutoencoderKLLTX2Audio", "base_channels": dd.get("ch", 128),
        "output_channels": dd.get("out_ch", 2), "ch_mult": tuple(dd.get("ch_mult", (1, 2, 4))),
        "num_res_blocks": dd.get("num_res_blocks", 2), "attn_resolutions": tuple(attn) if attn else None,
        "in_channels": dd.get("in_channels", 2), "resolution": dd.get("resolution", 256),
        "latent_channels": dd.get("z_channels", 8), "norm_type": dd.get("norm_type", "pixel"),
        "causality_axis": dd.get("causality_axis", "height"), "dropout": dd.get("dropout", 0.0),
        "mid_block_add_attention": dd.get("mid_block_add_attention", True),
        "sample_rate": params.get("sampling_rate", 16000), "mel_hop_length": stft.get("hop_length", 160),
        "is_causal": stft.get("causal", True), "double_z": dd.get("double_z", True),
        "mel_bins": dd.get("mel_bins") or mel.get("n_mel_channels") or (a.get("variables") or {}).get("mel_bins"),
    }


# What ltx-core fixes in code for each published generator (diffusers' conversion: LTX-2.0's HiFi-GAN vocoder with
# a final tanh; LTX-2.3 / 2.5's BigVGAN-v2 vocoder and bandwidth extender, no final activation of their own).
_HIFIGAN = {"act_fn": "leaky_relu", "leaky_relu_negative_slope": 0.1, "antialias": False, "final_act_fn": "tanh"}
_BIGVGAN = {"act_fn": "snakebeta", "leaky_relu_negative_slope": 0.1, "antialias": True, "antialias_ratio": 2,
            "antialias_kernel_size": 12, "final_act_fn": None}


def _generator(g: Mapping[str, Any], prefix: str, keys: Any, shape: Any, fixed: Mapping[str, Any]) -> dict[str, Any]:
    """One generator's fields: widths and the final bias from its tensors (``prefix``: its diffusers key prefix),
    the upsampling and residual layout from the config."""
    out_ch, in_ch = shape(prefix + "conv_in.weight")[:2]
    return {
        "in_channels": int(in_ch), "hidden_channels": int(out_ch), "out_channels": 2,
        "upsample_kernel_sizes": tuple(g.get("upsample_kernel_sizes", (16, 15, 8, 4, 4))),
        "upsample_factors": tuple(g.get("upsample_rates", (6, 5, 2, 2, 2))),
        "resnet_kernel_sizes": tuple(g.get("resblock_kernel_sizes", (3, 7, 11))),
        "resnet_dilations": tuple(tuple(d) for d in g.get("resblock_dilation_sizes", ((1, 3, 5),) * 3)),
        "final_bias": prefix + "conv_out.bias" in keys, **fixed,
    }


def vocoder_config(c: Mapping[str, Any], keys: Any, shape: Any, where: str) -> dict[str, Any]:
    """The vocoder's ``config.json`` from the metadata's ``vocoder`` section and its diffusers tensor names /
    shapes."""
    if "bwe" not in c:
        if c.get("resblock", "1") != "1":
            raise UserError(f"{where}: vocoder resblock={c['resblock']!r} without a 'bwe' section is not a "
                            "published LTX-2 vocoder")
        fixed = dict(_HIFIGAN, final_act_fn="tanh" if c.get("use_tanh_at_final", True) else "clamp")
        return {"_class_name": "LTX2Vocoder", **_generator(c, "", keys, shape, fixed),
                "output_sampling_rate": c.get("output_sampling_rate", 24000)}
    voc, bwe = c.get("vocoder") or {}, c["bwe"]
    for name, g in (("vocoder", voc), ("bwe", bwe)):
        if not isinstance(g, dict) or g.get("resblock") != "AMP1" or g.get("activation") != "snakebeta":
            raise UserError(f"{where}: vocoder {name} is not BigVGAN-v2 (resblock AMP1, snakebeta activation), the "
                            "LTX-2.3+ vocoder vidax reads")
    stage2 = _generator(bwe, "bwe_generator.", keys, shape, _BIGVGAN)
    return {"_class_name": "LTX2VocoderWithBWE", **_generator(voc, "vocoder.", keys, shape, _BIGVGAN),
            **{"bwe_" + k: v for k, v in stage2.items()}, "filter_length": bwe.get("n_fft", 512),
            "hop_length": bwe.get("hop_length", 80), "window_length": bwe.get("n_fft", 512),
            "num_mel_channels": bwe.get("num_mels", 64), "input_sampling_rate": bwe.get("input_sampling_rate", 16000),
            "output_sampling_rate": bwe.get("output_sampling_rate", 48000)}
