"""Video autoencoders shared by several families: Wan2.1 and Wan2.2 VAEs, causal-conv streaming, tiled decode/encode.

Modules: ``causal_conv`` (causal 3D conv + the per-conv feature cache carried between time chunks), ``wan21`` /
``wan22`` (the two Wan VAEs) with their key tables ``convert_wan21`` / ``convert_wan22``, and ``tiling`` (spatial
tiles with the reference's overlap and blending, temporal chunks, work spread over several devices).
"""
