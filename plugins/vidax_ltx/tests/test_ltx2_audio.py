"""LTX-2 audio decoding against diffusers 0.42.1 (torch is a test-only oracle): the audio VAE
(``AutoencoderKLLTX2Audio``) decode and encode, the vocoder (``LTX2Vocoder``, the LTX-2.0 leaky-ReLU generator and
the anti-aliased SnakeBeta one), and LTX2Pipeline's audio tail (denormalise, unpack, decode, vocode), on tiny random
models loaded from the reference's ``save_pretrained`` folders;
the full-size architectures (diffusers' defaults) without weights.

Bounds: :func:`vidax_core.testing.parity.assert_fp32_parity`, i.e. 4 x (the reference's fp32-vs-float64 error +
vidax's own fp32 error), against the reference run in float64. Each parity check has a wrong variant that lands
outside its bound."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.io.convert import ConversionError  # noqa: E402
from vidax_core.testing.parity import assert_fp32_parity, fp32_bound, fp32_error, max_abs  # noqa: E402
from vidax_core.testing.reference import check_full_size, randomize_  # noqa: E402
from vidax_ltx import ltx2_audio as glue  # noqa: E402
from vidax_ltx.ltx2_audio_vae import (  # noqa: E402
    AUDIO_VAE_RULES, LTX2AudioVAE, LTX2AudioVAEConfig, decode, encode, load_audio_vae)
from vidax_ltx.ltx2_vocoder import (  # noqa: E402
    VOCODER_RULES, LTX2Vocoder, LTX2VocoderConfig, load_vocoder, vocode)
from vidax_core.testing.tiny.ltx2 import VOCODER_BWE as TINY_BWE  # noqa: E402
from vidax_ltx.ltx2_vocoder_bwe import (  # noqa: E402
    VOCODER_BWE_IGNORE, VOCODER_BWE_RULES, LTX2VocoderBWE, LTX2VocoderBWEConfig)

pytestmark = pytest.mark.xdist_group("ltx2_audio")
diffusers.utils.logging.set_verbosity_error()

#: LTX-2's audio VAE layout (pixel norm, causal in time, three levels) at tiny widths; 4 latent channels x 4 latent
#: mel bins = 16 packed features = base_channels, as the pipeline's per-feature statistics need.
TINY_VAE = dict(base_channels=16, ch_mult=(1, 2, 4), num_res_blocks=1, latent_channels=4, mel_bins=16,
                output_channels=2, in_channels=2)
#: The other branches of the reference: GroupNorm, non-causal, attention (mid and level), two levels (the decoder's
#: 2 L frames zero-padded to 4 L - 3).
TINY_VAE_GROUP = dict(TINY_VAE, base_channels=32, ch_mult=(1, 2), norm_type="group", causality_axis="none",
                      mid_block_add_attention=True, attn_resolutions=(8,), resolution=16)
#: The vocoder reads the VAE's mel: 2 channels x 16 bins.
TINY_VOCODER = dict(in_channels=32, hidden_channels=32, out_channels=2, upsample_kernel_sizes=(8, 5),
                    upsample_factors=(4, 3), resnet_kernel_sizes=(3, 5), resnet_dilations=((1, 3), (1, 2)))
TINY_VOCODERS = {
    "leaky": TINY_VOCODER,  # LTX-2.0's generator
    "snakebeta": dict(TINY_VOCODER, act_fn="snakebeta", antialias=True, final_act_fn=None, final_bias=False),
}
B, L = 2, 5  # latent frames -> 17 mel frames -> 17 x 12 samples


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """The reference on one thread: its tiny grouped convs run ~20x slower with two threads on a busy machine."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _load_files(path):
    from safetensors.numpy import load_file

    config = json.loads((path / "config.json").read_text())
    tensors = {}
    for f in sorted(path.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return config, tensors


def _saved(tmp_path_factory, ref, name):
    path = tmp_path_factory.mktemp(name)
    ref.save_pretrained(path, safe_serialization=True)
    return _load_files(path)


def _audio_vae_ref(kw, seed):
    from diffusers import AutoencoderKLLTX2Audio

    ref = AutoencoderKLLTX2Audio(**kw).eval()
    randomize_(ref, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # statistics away from 0 / 1, so forgetting to denormalise shows
        ref.latents_mean.copy_(torch.randn(ref.latents_mean.shape, generator=g))
        ref.latents_std.copy_(0.5 + torch.rand(ref.latents_std.shape, generator=g))
    return ref


@pytest.fixture(scope="module")
def audio_vae(tmp_path_factory):
    """(reference, its saved tensors, vidax audio VAE loaded from its audio_vae/ folder)."""
    ref = _audio_vae_ref(TINY_VAE, seed=1)
    config, tensors = _saved(tmp_path_factory, ref, "audio_vae")
    return ref, tensors, load_audio_vae(LTX2AudioVAEConfig.from_config(config), tensors, with_encoder=True)


@pytest.fixture(scope="module")
def vocoders(tmp_path_factory):
    """name -> (reference, its saved tensors, vidax vocoder loaded from its vocoder/ folder), built on first use."""
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder as RefVocoder

    built = {}

    def get(name):
        if name not in built:
            ref = RefVocoder(**TINY_VOCODERS[name]).eval()
            randomize_(ref, seed=2)
            config, tensors = _saved(tmp_path_factory, ref, f"vocoder_{name}")
            built[name] = ref, tensors, load_vocoder(LTX2VocoderConfig.from_config(config), tensors)
        return built[name]

    return get


def _run(module, fn, dtype, *arrays):
    """The reference ``fn(module, *tensors)`` in ``dtype``, as float64 numpy (the module back in float32 after)."""
    try:
        with torch.no_grad():
            out = fn(module.to(dtype), *(torch.from_numpy(np.asarray(a)).to(dtype) for a in arrays))
    finally:
        module.to(torch.float32)
    return out.double().numpy() if isinstance(out, torch.Tensor) else tuple(o.double().numpy() for o in out)


def _ref_decode(ref, z):
    return [_run(ref, lambda m, x: m.decode(x).sample, dt, z) for dt in (torch.float32, torch.float64)]


def _latents(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------------- audio VAE


def test_audio_vae_decode_matches_reference(audio_vae):
    ref, tensors, vae = audio_vae
    cfg = vae.cfg
    z = _latents((B, 4, L, 4))
    ref32, ref64 = _ref_decode(ref, z)
    got = decode(vae, z)
    assert got.shape == (B, 2, 4 * L - 3, 16) and got.dtype == np.float32
    own = fp32_error(lambda w, x: decode(load_audio_vae(cfg, w, with_encoder=False), x), tensors, z, base=got)
    assert_fp32_parity("audio VAE decode", got, ref32, ref64, vidax_err=own)
    # can fail: the same weights read as a non-causal VAE (symmetric time padding, no dropped rows)
    wrong_cfg = dataclasses.replace(cfg, causality_axis="none")
    wrong = decode(load_audio_vae(wrong_cfg, tensors, with_encoder=False), z)
    assert max_abs(wrong[:, :, : got.shape[2]], ref64) > 100 * fp32_bound(ref32, ref64, own)


def test_audio_vae_encode_matches_reference(audio_vae):
    ref, tensors, vae = audio_vae
    mel = _latents((B, 2, 4 * L - 3, 16), seed=1)
    fn = lambda m, x: (lambda d: (d.mean, d.logvar))(m.encode(x).latent_dist)  # noqa: E731
    (m32, lv32), (m64, lv64) = (_run(ref, fn, dt, mel) for dt in (torch.float32, torch.float64))
    mean, logvar = encode(vae, mel)
    assert mean.shape == logvar.shape == (B, 4, L, 4)
    own = fp32_error(lambda w, x: np.concatenate(encode(load_audio_vae(vae.cfg, w, with_encoder=True), x)),
                     tensors, mel, base=np.concatenate([mean, logvar]))
    assert_fp32_parity("audio VAE encode mean", mean, m32, m64, vidax_err=own)
    assert_fp32_parity("audio VAE encode logvar", logvar, lv32, lv64, vidax_err=own)


def test_audio_vae_group_norm_attention_variant(tmp_path_factory):
    """GroupNorm, non-causal convs (no row dropped: 2 L frames), attention blocks, and the decoder zero-padding its
    output to 4 L - 3 frames."""
    ref = _audio_vae_ref(TINY_VAE_GROUP, seed=3)
    config, tensors = _saved(tmp_path_factory, ref, "audio_vae_group")
    cfg = LTX2AudioVAEConfig.from_config(config)
    vae = load_audio_vae(cfg, tensors, with_encoder=False)
    z = _latents((1, 4, 4, 4), seed=2)
    ref32, ref64 = _ref_decode(ref, z)
    got = decode(vae, z)
    assert got.shape == (1, 2, 13, 16) and np.all(got[:, :, 8:] == 0)  # 2 L = 8 decoded frames (no causal row), zeros
    own = fp32_error(lambda w, x: decode(load_audio_vae(cfg, w, with_encoder=False), x), tensors, z, base=got)
    assert_fp32_parity("audio VAE decode (group norm, attention)", got, ref32, ref64, vidax_err=own)


def test_audio_vae_load_errors(audio_vae):
    _, tensors, vae = audio_vae
    broken = {k: v for k, v in tensors.items() if "mid.block_1.conv1" not in k}
    with pytest.raises(ConversionError, match="missing"):
        load_audio_vae(vae.cfg, broken, with_encoder=False)
    with pytest.raises(UserError, match="causality_axis"):
        LTX2AudioVAEConfig.from_config(dict(TINY_VAE, causality_axis="time"))
    with pytest.raises(UserError, match="GroupNorm"):
        LTX2AudioVAEConfig.from_config(dict(TINY_VAE, norm_type="group"))
    with pytest.raises(UserError, match=r"\(B, 4, frames, mel bins\)"):
        decode(vae, np.zeros((1, 3, 2, 4), np.float32))


# ------------------------------------------------------------------------------------------------------ vocoder


@pytest.mark.parametrize("name", sorted(TINY_VOCODERS))
def test_vocoder_matches_reference(vocoders, name):
    ref, tensors, voc = vocoders(name)
    mel = _latents((B, 2, 4 * L - 3, 16), seed=3)
    ref32, ref64 = (_run(ref, lambda m, x: m(x), dt, mel) for dt in (torch.float32, torch.float64))
    got = vocode(voc, mel)
    assert got.shape == (B, 2, (4 * L - 3) * 12)
    own = fp32_error(lambda w, x: vocode(load_vocoder(voc.cfg, w), x), tensors, mel, base=got)
    assert_fp32_parity(f"vocoder ({name})", got, ref32, ref64, vidax_err=own)
    # can fail: the wrong final activation (LTX-2.0's act_out keeps torch's default slope 0.01, not the config's;
    # the SnakeBeta one is anti-aliased)
    wrong = load_vocoder(voc.cfg, tensors)
    if name == "leaky":
        wrong.act_out.slope = voc.cfg.leaky_relu_negative_slope
    else:
        wrong.act_out = wrong.act_out.act
    assert max_abs(vocode(wrong, mel), ref64) > 100 * fp32_bound(ref32, ref64, own)


def _stft_buffers(ref, seed):
    """The STFT and mel buffers diffusers leaves at zeros (the checkpoint holds them): a Hann-windowed DFT basis, its
    un-windowed twin as the (unused) inverse basis, and a positive random mel filterbank."""
    fl = ref.config.filter_length
    n, k = np.arange(fl), np.arange(fl // 2 + 1)[:, None]
    dft = np.concatenate([np.cos(2 * np.pi * k * n / fl), -np.sin(2 * np.pi * k * n / fl)])
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * n / fl)
    mel = np.abs(np.random.default_rng(seed).standard_normal(tuple(ref.mel_stft.mel_basis.shape)))
    with torch.no_grad():
        ref.mel_stft.stft_fn.forward_basis.copy_(torch.from_numpy((dft * hann)[:, None, :].astype(np.float32)))
        ref.mel_stft.stft_fn.inverse_basis.copy_(torch.from_numpy(dft[:, None, :].astype(np.float32)))
        ref.mel_stft.mel_basis.copy_(torch.from_numpy(mel.astype(np.float32)))


def test_vocoder_bwe_matches_reference(tmp_path_factory):
    """``LTX2VocoderWithBWE`` (LTX-2.3+), loaded through the vocoder/ folder's ``_class_name``."""
    from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

    ref = LTX2VocoderWithBWE(**TINY_BWE).eval()
    randomize_(ref, seed=4)
    _stft_buffers(ref, seed=4)
    config, tensors = _saved(tmp_path_factory, ref, "vocoder_bwe")
    voc = glue.load_audio_vocoder(config, tensors)
    cfg = voc.cfg
    mel = _latents((B, 2, 4 * L - 3, 16), seed=5)
    ref32, ref64 = (_run(ref, lambda m, x: m(x), dt, mel) for dt in (torch.float32, torch.float64))
    got = vocode(voc, mel)
    assert got.shape == (B, 2, (4 * L - 3) * 8 * 2) and glue.sample_rate(voc) == 32000
    own = fp32_error(lambda w, x: vocode(glue.load_audio_vocoder(config, w), x), tensors, mel, base=got)
    assert_fp32_parity("vocoder with bandwidth extension", got, ref32, ref64, vidax_err=own)
    # can fail: the STFT read from the checkpoint's other basis (same shape: the un-windowed inverse one)
    swapped = dict(tensors, **{"mel_stft.stft_fn.forward_basis": tensors["mel_stft.stft_fn.inverse_basis"]})
    wrong = vocode(glue.load_audio_vocoder(config, swapped), mel)
    assert max_abs(wrong, ref64) > 100 * fp32_bound(ref32, ref64, own)
    assert cfg.stage1().hop * cfg.output_sampling_rate // cfg.input_sampling_rate == 16


def test_vocoder_config_checks():
    with pytest.raises(UserError, match="leaky_relu with antialias"):
        LTX2VocoderConfig.from_config(dict(TINY_VOCODER, antialias=True))
    with pytest.raises(UserError, match="act_fn"):
        LTX2VocoderConfig.from_config(dict(TINY_VOCODER, act_fn="gelu"))
    with pytest.raises(UserError, match="differ in length"):
        LTX2VocoderConfig.from_config(dict(TINY_VOCODER, upsample_factors=(4,)))


# --------------------------------------------------------------------------------------------- pipeline's tail


def test_pipeline_audio_tail(audio_vae, vocoders):
    """LTX2Pipeline's end, from the DiT's normalised tokens: ``_denormalize_audio_latents``,
    ``_unpack_audio_latents``, ``audio_vae.decode``, ``vocoder`` (the pipeline's own static methods as the oracle);
    and its way in (``_pack_audio_latents`` then ``_normalize_audio_latents``) inverted exactly."""
    from diffusers import LTX2Pipeline as P

    ref_vae, vae_tensors, vae = audio_vae
    ref_voc, voc_tensors, voc = vocoders("leaky")
    tokens = _latents((B, L, 16), seed=4)

    def reference(dtype):
        t = torch.from_numpy(tokens).to(dtype)
        with torch.no_grad():
            ref_vae.to(dtype), ref_voc.to(dtype)
            try:
                raw = P._unpack_audio_latents(P._denormalize_audio_latents(t, ref_vae.latents_mean,
                                                                          ref_vae.latents_std), L, num_mel_bins=4)
                return ref_voc(ref_vae.decode(raw).sample).double().numpy(), raw.double().numpy()
            finally:
                ref_vae.to(torch.float32), ref_voc.to(torch.float32)

    (ref32, _), (ref64, raw64) = reference(torch.float32), reference(torch.float64)
    raw = np.asarray(glue.unpack_audio_latents(glue.denormalize_audio_latents(vae, tokens), 4))
    np.testing.assert_allclose(raw, raw64, rtol=1e-6, atol=1e-6)
    got = glue.decode_audio_tokens(vae, voc, tokens)
    assert got.shape == ref64.shape == (B, 2, (4 * L - 3) * 12)

    def chain(wv, wc, x):
        return glue.decode_audio_tokens(load_audio_vae(vae.cfg, wv, with_encoder=False), load_vocoder(voc.cfg, wc), x)

    own = fp32_error(chain, vae_tensors, voc_tensors, tokens, base=got)
    assert_fp32_parity("pipeline audio tail", got, ref32, ref64, vidax_err=own)
    # can fail: tokens decoded without denormalisation
    wrong = glue.decode_audio(vae, voc, glue.unpack_audio_latents(tokens, 4))
    assert max_abs(wrong, ref64) > 100 * fp32_bound(ref32, ref64, own)
    # the way in: raw latents -> tokens exactly as the pipeline's prepare_audio_latents
    z = torch.from_numpy(raw64.astype(np.float32))
    want = P._normalize_audio_latents(P._pack_audio_latents(z), ref_vae.latents_mean, ref_vae.latents_std).numpy()
    np.testing.assert_allclose(np.asarray(glue.normalize_audio_latents(vae, glue.pack_audio_latents(raw64))),
                               want, rtol=1e-5, atol=1e-5)
    # the raw path is the same program as the pipeline's output_type="latent" -> decode
    np.testing.assert_array_equal(glue.decode_audio(vae, voc, raw), got)
    assert glue.sample_rate(voc) == 24000
    # 121 frames at 24 fps, 16 kHz, hop 160: the pipeline's audio_num_frames
    assert glue.audio_latent_frames(vae.cfg, 121, 24.0) == round(121 / 24.0 * 16000 / 160 / 4)


# ------------------------------------------------------------------------------------------- full-size layouts


def test_full_size_architectures_without_weights():
    """LTX-2's audio VAE and vocoder and LTX-2.3+'s bandwidth-extension vocoder at diffusers' default configs:
    every key and shape of the reference on the meta device."""
    from diffusers import AutoencoderKLLTX2Audio
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder as RefVocoder, LTX2VocoderWithBWE

    check_full_size(AutoencoderKLLTX2Audio, AUDIO_VAE_RULES, lambda: LTX2AudioVAE(LTX2AudioVAEConfig()),
                    component="audio_vae")
    check_full_size(RefVocoder, VOCODER_RULES, lambda: LTX2Vocoder(LTX2VocoderConfig()), component="vocoder")
    check_full_size(LTX2VocoderWithBWE, VOCODER_BWE_RULES, lambda: LTX2VocoderBWE(LTX2VocoderBWEConfig()),
                    component="vocoder with BWE", ignore=VOCODER_BWE_IGNORE)
