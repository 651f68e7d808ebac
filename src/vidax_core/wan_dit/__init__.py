"""The Wan DiT (diffusers ``WanTransformer3DModel``), shared by the families built on it.

Wan uses it as it is; SkyReels-V2 adds per-frame timesteps, block-causal attention and an fps embedding in a
subclass; Helios builds its own blocks from the same embedders and attention parts. :mod:`.model` is the module,
:mod:`.keys` its diffusers key table and loader, :mod:`.flops` its FLOP count.
"""
