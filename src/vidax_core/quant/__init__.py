"""Weight-only 8-bit DiT weights: ``model.weight_dtype: float8_e4m3fn | int8`` or an 8-bit checkpoint.

The big matrices of the transformer blocks (and the embedder matrices a family names) stay 8-bit on the devices
(and on the host when offloaded) with one fp32 scale per output channel, and are dequantised into the compute dtype
inside the layer's matmul; everything else (norms, modulation, patch embedding, output head) stays in full
precision. Modules, one concept each:

* :mod:`.modes` – the two storage dtypes and the quantizer (absmax per tensor for fp8, per output channel for int8);
* :mod:`.linear` – turning a model's block Linear layers (and named ones outside the blocks) into 8-bit ones;
* :mod:`.keep` – the default list of layers kept in full precision (a family overrides it through a hook);
* :mod:`.formats` – recognising the 8-bit files people download (plain casts, ComfyUI, LightX2V) from their tensors;
* :mod:`.source` – a checkpoint's tensors with the scale tensors folded into their weights;
* :mod:`.leaf` – one tensor converted onto a (possibly 8-bit) parameter, its scale following the same transform;
* :mod:`.policy` – what a run uses (the run key or the checkpoint's own storage) applied to a denoiser build.
* :mod:`.stored` – a prompt encoder built as its file stores it: the Linear kernels an 8-bit file holds stay 8-bit.
"""
