"""The Kandinsky 6 super-resolution plugin object (``kandinsky6-vsr*``): a third entry point of this package, video
in, video out, as diffusers' ``Kandinsky6SRPipeline`` runs it (:mod:`.k6sr_windows`: the tiles, one window per DiT
call; :mod:`.k6sr_autoencoder`: the K-VAE decode and the Hann blend; :mod:`.k6sr_dit`: the NABLA DiT). The DiT
takes no prompt: the plugin's prompt encoder gives an empty context. The generation ids run it as a second stage
over their frames with ``options.super_resolution`` (:mod:`.k6_plugin`). Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype

from . import k6sr_presets


class _NoText:
    """The prompt encoder of a text-free model: nothing to load."""


class Kandinsky6SRPlugin(FamilyPlugin):
    family = "kandinsky"
    models = k6sr_presets.MODELS
    options = k6sr_presets.OPTIONS
    dit_config_class = ".k6sr_dit:Kandinsky6SRDiTConfig"
    dit_rules = ".k6_convert:K6SR_DIT_RULES"
    checks = ".k6sr_checks"
    diffusers_reference = ".k6sr_bench_reference:Kandinsky6SRDiffusersReference"

    def _geometry(self, ckpt, run):
        from .k6sr_tiles import geometry
        from .k6sr_vae import Kandinsky6SRVAEConfig

        vae = Kandinsky6SRVAEConfig.from_config(ckpt.config("vae"))
        s, o = run.sampling, run.options
        return geometry(s.height, s.width, s.num_frames, float(o.get("resolution_scale", 2.25)),
                        float(o.get("min_overlap", 0.2)), self.dit_config(ckpt).tile_sizes, vae.spatial_ratio,
                        vae.temporal_compression_ratio), vae

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild

        from .k6sr_dit import Kandinsky6SRDiT, example_inputs
        from .k6sr_flops import counter

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        return DitBuild.of(Kandinsky6SRDiT, cfg, in_channels=cfg.in_visual_dim, heads=cfg.heads,
                           patch_size=cfg.patch_size, block_counts={"visual_blocks": cfg.num_visual_blocks},
                           latent_shapes=lambda b, g: (b, *(int(v) for v in g), cfg.in_visual_dim),
                           flops=counter(cfg), example_inputs=functools.partial(example_inputs, cfg))

    def build_text_encoder(self, spec, ckpt, run, mesh):
        return _NoText()

    def encode_prompt(self, spec, encoder, prompts, run):
        import numpy as np

        return np.zeros((len(prompts), 0, 1), np.float32)  # no text tokens: the DiT reads no context

    def build_vae(self, spec, ckpt, run):
        from .k6sr_autoencoder import Kandinsky6SRAutoencoder
        from .k6sr_vae import load_kvae

        geom, cfg = self._geometry(ckpt, run)
        return Kandinsky6SRAutoencoder(load_kvae(cfg, ckpt.tensors("vae"), with_encoder=False), geom)

    def vae_latent_shape(self, spec, ckpt, run):
        return self._geometry(ckpt, run)[0].latent_grid

    def sampling_windows(self, spec, ckpt, run):
        from .k6sr_windows import TileWindows

        geom, cfg = self._geometry(ckpt, run)
        return TileWindows(run, ckpt, geom, cfg, dit_weight_dtype(run))

    def builtin_checkpoint(self, spec, name):
        return super().builtin_checkpoint(spec, f"k6sr-{name}")
