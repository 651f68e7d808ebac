"""The names of the attention backends ``attention.backend`` may take (``auto`` picks one by platform)."""

ATTENTION_BACKENDS = ("auto", "xla", "cudnn", "splash", "pallas_tpu", "blockwise")
