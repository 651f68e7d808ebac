"""vidax-core: the runtime, plugin hooks, samplers and generic pipeline of the vidax video diffusion engine.

A family plugin imports what it needs from here, not from deep paths::

    from vidax_core import FamilyPlugin, Option, DitBuild, Conditioning, UserError, KeyRule, convert

This is the whole public plugin API: the plugin object and what its hooks return, checkpoint reading and
conversion, layers and stacked blocks (a group's carry may be any pytree; several groups run in
``block_groups`` order), attention (self, cross, joint/dual-stream, sequence-parallel), RoPE (interleaved and
rotate-half), the shared encoders (T5 / byT5, decoder LLMs such as Qwen2.5-VL, CLIP and SigLIP towers, tokenizers,
chat templates), VAE blocks (group norm, causal conv) and sharding.

Names resolve lazily (the first access imports the defining module), so ``vidax list-models`` and plugin
registration do not import JAX.
"""

from importlib import import_module as _import_module
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("vidax-core")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"

# public name -> defining module (relative to vidax_core)
_EXPORTS = {
    # the plugin object, hooks and the model registry
    "FamilyPlugin": "family", "hookspec": "hookspecs",
    "ModelSpec": "registry", "Option": "registry",
    "UserError": "errors", "PluginError": "errors", "Plugins": "plugins",
    "frame_count_problems": "run_checks", "size_problems": "run_checks",
    "latent_channel_problems": "run_checks",
    # what hooks return
    "DitBuild": "model_api", "GridLimit": "model_api", "Conditioning": "model_api", "Decoded": "model_api",
    "VideoAutoencoder": "model_api", "OffloadableDit": "model_api", "SamplingPass": "model_api",
    "FrameStage": "model_api",
    "WindowedSampling": "windows", "Window": "windows", "WindowStart": "windows", "WindowDone": "windows",
    "CacheFill": "windows", "CacheSpec": "causal.kv", "Segment": "causal.kv", "View": "causal.kv",
    "KVCache": "causal.kv",
    "Guidance": "guidance", "Branch": "guidance", "ClassifierFree": "guidance", "NoGuidance": "guidance",
    "SpatioTemporal": "guidance", "Embedded": "guidance", "CFGZeroStar": "guidance", "default_guidance": "guidance",
    # checkpoints and conversion
    "Checkpoint": "io.checkpoint", "KeyRule": "io.convert", "convert": "io.convert", "linear": "io.convert",
    "ConversionError": "io.convert", "linear_rules": "io.diffusers_rules", "norm_rules": "io.diffusers_rules",
    "attention_rules": "io.diffusers_rules", "feedforward_rules": "io.diffusers_rules",
    "conv": "io.convert", "read_video": "io.clip", "load_image": "io.image", "preprocess_image": "io.image",
    "from_config_dict": "io.arch", "SOURCE_KEY": "io.arch", "RunConfig": "config",
    "ArchConfig": "io.arch_base", "TransformerConfig": "io.arch_base", "CheckedConfig": "io.arch_base",
    # layers and model state
    "param": "nn.layers", "Linear": "nn.layers", "stacked": "nn.layers", "scan_blocks": "nn.layers",
    "LAYERS": "nn.layers", "abstract_model": "nn.state", "materialize": "nn.state",
    "layer_norm": "nn.norms", "rms_norm": "nn.norms", "LayerNorm": "nn.norms", "RMSNorm": "nn.norms",
    "timestep_embedding": "nn.timestep", "TimestepEmbedding": "nn.timestep", "modulate": "nn.adaln",
    "gate": "nn.adaln", "split_modulation": "nn.adaln", "patchify": "nn.patchify", "unpatchify": "nn.patchify",
    "Attention": "nn.attention_block", "FeedForward": "nn.feedforward", "GatedFeedForward": "nn.feedforward",
    "GLUMBConv": "nn.conv_feedforward", "glumb_conv_rules": "nn.conv_feedforward",
    "linear_attention": "attention.linear",
    "rope": "nn.rope", "apply_rope": "nn.rope", "apply_interleaved": "nn.rope", "apply_rotate_half": "nn.rope",
    "inv_freq": "nn.rope", "grid_angles": "nn.rope", "cos_sin": "nn.rope",
    # shared encoders and VAE blocks
    "T5Config": "encoders.t5", "load_t5": "encoders.t5", "encode_text": "encoders.t5",
    "T5Text": "encoders.t5_text", "load_t5_text": "encoders.t5_text", "encode_unmasked": "encoders.t5_text",
    "TextTokenizer": "encoders.tokenizer", "group_norm": "nn.group_norm", "GroupNorm": "nn.group_norm",
    "CausalConv3d": "vae.causal_conv", "FeatureCache": "vae.causal_conv", "vae_loader": "vae.loader",
    "dit_loader": "io.load", "load_model": "io.load",
    # the shared prompt and image towers (encoders.towers: load from a checkpoint component, encode)
    "load_tokenizer": "encoders.towers", "load_llm": "encoders.towers", "encode_llm": "encoders.towers",
    "load_vit_tower": "encoders.towers", "encode_vit": "encoders.towers", "VIT_KINDS": "encoders.towers",
    "load_t5_tower": "encoders.towers", "encode_t5": "encoders.towers",
    "DecoderLLMConfig": "encoders.decoder_llm", "DecoderLLM": "encoders.decoder_llm",
    "load_decoder_llm": "encoders.decoder_llm", "ViTConfig": "encoders.vit", "ViTEncoder": "encoders.vit",
    "T5Encoder": "encoders.t5", "load_chat_template": "encoders.chat_template",
    "render_chat": "encoders.chat_template", "special_tokens": "encoders.chat_template",
    "preprocess_images": "encoders.clip_vision", "prompt_clean": "encoders.prompt_clean",
    # parallelism and attention
    "constrain": "parallel.sharding", "DEFAULT_RULES": "parallel.sharding", "attention": "attention",
    "replicated_attention": "attention.ulysses",
    "self_attention": "attention.ulysses", "cross_attention": "attention.ulysses",
    "joint_attention": "attention.ulysses",
    # built-in checkpoints generated on first use
    "generated_checkpoint": "io.builtin", "write_diffusers": "io.builtin", "random_weights": "io.builtin",
    "packaged_checkpoint": "io.builtin", "dit_weight_dtype": "model_api",
    # random checkpoints with a cut text encoder
    "TextLayerReader": "bench.text_layers",
}

_RENAMED = {"apply_rope": "apply", "rope": None}  # public name -> name in its module (None: the module)

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vidax_core' has no attribute {name!r}")
    mod = _import_module(f"vidax_core.{module}")
    attr = _RENAMED.get(name, name)
    value = mod if name == module or attr is None else getattr(mod, attr)
    globals()[name] = value
    return value
