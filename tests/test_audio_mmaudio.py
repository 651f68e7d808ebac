"""MMAudio's audio decoder (diffusers ``MMAudioVAE`` decode + ``MMAudioVocoder``) against the PyTorch reference, on
tiny random modules: the mel spectrogram, then the waveform the Kandinsky 6 pipeline muxes (fp32)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.audio import mmaudio  # noqa: E402
from vidax_core.testing.parity import rel_l2  # noqa: E402
from vidax_core.testing.reference import state_arrays  # noqa: E402

VAE = dict(mel_bins=8, latent_channels=6, hidden_channels=8, channel_multipliers=(1, 2), layers_per_block=1,
           sample_rate=16000, n_fft=32, hop_length=8, scaling_factor=0.53)
VOCODER = dict(num_mels=8, upsample_initial_channel=16, upsample_rates=(4, 2), upsample_kernel_sizes=(8, 4),
               resblock_kernel_sizes=(3, 5), resblock_dilation_sizes=((1, 3), (1, 2)))
FRAMES = 9


def _randomize(module, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            n = torch.randn(p.shape, generator=gen)
            if name.endswith("weight") and p.ndim >= 2:
                p.copy_(n / p[0].numel() ** 0.5)
            else:
                p.copy_(0.3 * n)
        for name, b in module.named_buffers():
            if name.endswith("data_mean"):
                b.copy_(torch.randn(b.shape, generator=gen))
            elif name.endswith("data_std"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))


@pytest.fixture(scope="module")
def reference():
    from diffusers import MMAudioVAE, MMAudioVocoder

    torch.manual_seed(0)
    vae, vocoder = MMAudioVAE(**VAE).eval(), MMAudioVocoder(**VOCODER).eval()
    _randomize(vae, 1)
    _randomize(vocoder, 2)
    z = np.random.default_rng(3).standard_normal((2, VAE["latent_channels"], FRAMES)).astype(np.float32)
    with torch.no_grad():
        mel = vae.decode(torch.from_numpy(z) / VAE["scaling_factor"], return_dict=False)[0]
        wave = vocoder(mel, return_dict=False)[0][:, 0]
    return vae, vocoder, z, mel.numpy(), wave.numpy()


@pytest.fixture(scope="module")
def ours(reference):
    vae, vocoder, *_ = reference
    vcfg = mmaudio.MMAudioVAEConfig.from_config(dict(vae.config))
    gcfg = mmaudio.vocoder_config(dict(vocoder.config), vcfg.sample_rate)
    assert mmaudio.check_pair(vcfg, gcfg) == []
    return mmaudio.load_vae(vcfg, state_arrays(vae)), mmaudio.load_vocoder(gcfg, state_arrays(vocoder))


def test_mel_and_waveform_match_diffusers(reference, ours):
    _, _, z, mel_ref, wave_ref = reference
    dec, voc = ours
    mel = np.asarray(dec(np.ascontiguousarray(z.transpose(0, 2, 1)) / np.float32(VAE["scaling_factor"])))
    wave = mmaudio.decode(dec, voc, z)
    print(f"mmaudio mel rel {rel_l2(mel.transpose(0, 2, 1), mel_ref):.2e}, wave rel {rel_l2(wave, wave_ref):.2e}")
    assert mel.transpose(0, 2, 1).shape == mel_ref.shape and rel_l2(mel.transpose(0, 2, 1), mel_ref) < 1e-5
    assert wave.shape == wave_ref.shape == (2, FRAMES * 2 * VAE["hop_length"])
    assert rel_l2(wave, wave_ref) < 1e-5


def test_wrong_pieces_are_caught(reference, ours, monkeypatch):
    """The residual blocks' input normalisation, or the vocoder's activations in the wrong order, move the
    result far past the tolerance."""
    _, _, z, mel_ref, wave_ref = reference
    dec, voc = ours
    zt = np.ascontiguousarray(z.transpose(0, 2, 1)) / np.float32(VAE["scaling_factor"])
    monkeypatch.setattr(mmaudio, "normalize", lambda x, axis=-1: x)
    broken = np.asarray(dec(zt)).transpose(0, 2, 1)
    monkeypatch.undo()
    assert rel_l2(broken, mel_ref) > 1e-2
    block = voc.resnets[0]
    block.acts1, block.acts2 = block.acts2, block.acts1
    try:
        swapped = mmaudio.decode(dec, voc, z)
    finally:
        block.acts1, block.acts2 = block.acts2, block.acts1
    assert rel_l2(swapped, wave_ref) > 1e-3


def test_mismatched_pair_is_named():
    vae = mmaudio.MMAudioVAEConfig(mel_bins=8, hop_length=8)
    voc = mmaudio.vocoder_config({**VOCODER, "num_mels": 10, "upsample_rates": (4, 4)}, 16000)
    problems = mmaudio.check_pair(vae, voc)
    assert len(problems) == 2 and "mel_bins=8" in problems[0] and "hop_length=8" in problems[1]
