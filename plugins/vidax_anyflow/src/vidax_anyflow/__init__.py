"""vidax plugin: AnyFlow (NVIDIA) any-step video diffusion, bidirectional and FAR causal."""
