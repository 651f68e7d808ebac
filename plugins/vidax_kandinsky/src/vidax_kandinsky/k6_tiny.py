"""Tiny random Kandinsky 6 pipelines built with diffusers (the PyTorch reference), for the parity tests and the
built-in checkpoint; torch, diffusers and transformers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text side is Kandinsky 5's tiny
Qwen2.5-VL and CLIP text (:mod:`vidax_kandinsky.tiny`); the DiT a 2 + 2 block ``Kandinsky6Transformer3DModel``
with the released flags (``visual_cond``, ``cross_gates``, ``fix_modulation``, ``ca_rope``, two token types); the
VAE a tiny ``AutoencoderKLHunyuanVideo``; a tiny ``MMAudioVAE`` and ``MMAudioVocoder`` whose hop lengths agree;
flow Euler with shift 5, or PiFlow (``distill=True``, the DiT's heads widened by its grid).
"""

from __future__ import annotations

TINY_K6_DIT = dict(in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=16, time_dim=24,
                   patch_size=(1, 2, 2), model_dim=32, ff_dim=48, num_text_blocks=2, num_visual_blocks=2,
                   axes_dims=(4, 6, 6), visual_cond=True, in_audio_dim=6, out_audio_dim=6, model_dim_a=32,
                   time_dim_a=24, ff_dim_a=40, axes_dims_a=(4, 6, 6), audio_freqs_scaling=0.144,
                   scale_factor=(1.0, 2.0, 2.0), text_token_padding=True, ca_rope=True, cross_gates=True,
                   fix_modulation=True, visual_token_type_num_embeddings=2)
