"""Tiny random reference pipelines of the built-in families, built with diffusers / transformers and saved with
``save_pretrained`` (every parameter seeded, biases and norm gains included), for parity tests. Needs the ``test``
extra."""
