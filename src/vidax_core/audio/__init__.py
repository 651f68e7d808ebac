"""Audio decoders shared by the families that make sound: the BigVGAN vocoder generator and MMAudio's VAE."""
