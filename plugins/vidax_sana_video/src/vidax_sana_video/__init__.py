"""vidax-sana-video: NVIDIA / MIT HAN Lab's SANA-Video in vidax: a linear-attention DiT with a convolutional
feed-forward, Gemma-2 prompt embeddings with the "complex human instruction", the Wan VAE and resolution binning."""
