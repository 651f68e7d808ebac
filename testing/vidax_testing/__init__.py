"""Test-only helpers shared by core and plugin tests (tiny tokenizers, tiny reference checkpoints).

Not part of any distribution; the root conftest.py puts this folder on sys.path. May import torch.
"""
