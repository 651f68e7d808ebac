"""The run checks families share (vidax_core.run_checks): each names the value to use, or the component that does
not belong."""

from __future__ import annotations

from types import SimpleNamespace

from vidax_core import frame_count_problems, latent_channel_problems, size_problems


class _Ckpt:
    def __init__(self, vae: dict | None):
        self.vae = vae

    def has(self, component: str) -> bool:
        return component == "vae" and self.vae is not None

    def config(self, component: str) -> dict:
        assert component == "vae"
        return self.vae


def test_frame_count_names_the_nearest_valid_count_above():
    assert frame_count_problems(81, 4, "Wan") == []
    (line,) = frame_count_problems(SimpleNamespace(num_frames=80), 4, "Wan", "the VAE", "; or 77")
    assert line == "sampling.num_frames must be 4k+1 for Wan (the VAE), got 80: use 81; or 77"


def test_sizes_name_a_multiple():
    lines = size_problems(SimpleNamespace(height=480, width=833), 16, "Wan")
    assert lines == ["sampling.width must be a multiple of 16 for Wan, got 833: use 832"]


def test_latent_channels_must_be_the_vaes():
    assert latent_channel_problems(_Ckpt({"z_dim": 48}), 48) == []
    assert latent_channel_problems(_Ckpt(None), 16) == []  # no VAE in the checkpoint: nothing to compare
    assert latent_channel_problems(_Ckpt({}), 16) == []  # the Wan VAE's default z_dim
    (line,) = latent_channel_problems(_Ckpt({"z_dim": 16}), 48, "latent_channel", "transformer/config.json")
    assert line.startswith("transformer/config.json: latent_channel=48 does not match z_dim=16 of vae/config.json")
