"""The original LTX-2.5 release folder (one safetensors per part, ltx-core's config in each file's metadata, the
Gemma file packing its config and tokenizer) loads to exactly the parameters of its diffusers twin, and a run from
it gives the diffusers folder's latents exactly.

The release folder is written from a tiny diffusers pipeline (LTX-2.5-style, and LTX-2.0's single file for the
parameter checks): every state dict renamed the other way round (ltx-core's names,
:mod:`vidax_core.testing.tiny.ltx2_original_keys`; the connectors inside the DiT file, their input projections in
the Gemma file), and each diffusers config.json written as the ltx-core config section it corresponds to.
diffusers' own single-file conversion maps the written DiT, VAE and audio-VAE keys back onto the diffusers ones,
so those renamings are an independent fixture.
"""

from __future__ import annotations

import json
import re
import shutil
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.errors import UserError  # noqa: E402
from vidax_core.testing.cli import vidax  # noqa: E402
from vidax_core.testing.tiny import ltx2_original_keys as orig  # noqa: E402
from vidax_ltx.ltx2_release import open_release, transformer_file  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_release")

MODEL_ID, MODEL_ID_20, MONOLITH = "ltx-2.5-22b-dev", "ltx-2-19b-dev", "ltx-2-19b-dev.safetensors"
DOWN = {"spatial": "compress_space_res", "temporal": "compress_time_res", "spatiotemporal": "compress_all_res"}
UP = {"spatial": "compress_space", "temporal": "compress_time", "spatiotemporal": "compress_all"}


def transformer_section(t: dict, c: dict) -> dict:
    """ltx-core's ``transformer`` config (DiT + connectors) of the diffusers DiT and connectors configs."""
    same = ("in_channels", "out_channels", "num_attention_heads", "attention_head_dim", "num_layers",
            "cross_attention_dim", "norm_eps", "audio_num_attention_heads", "audio_attention_head_dim",
            "audio_in_channels", "audio_out_channels", "audio_cross_attention_dim", "timestep_scale_multiplier",
            "rope_type", "use_prompt_adaln_single", "ff_bias", "audio_ff_bias", "use_keyframes_abs_pos_embedding")
    assert t["gated_attn"] == t["audio_gated_attn"] and t["cross_attn_mod"] == t["audio_cross_attn_mod"]
    assert c["video_gated_attn"] == c["audio_gated_attn"] and c["rope_type"] == t["rope_type"]
    out = {k: t[k] for k in same}
    out.update(
        positional_embedding_theta=t["rope_theta"],
        positional_embedding_max_pos=[t["pos_embed_max_pos"], t["base_height"], t["base_width"]],
        audio_positional_embedding_max_pos=[t["audio_pos_embed_max_pos"]],
        av_ca_timestep_scale_multiplier=t["cross_attn_timestep_scale_multiplier"],
        frequencies_precision="float64" if t["rope_double_precision"] else "float32",
        apply_gated_attention=t["gated_attn"], cross_attention_adaln=t["cross_attn_mod"],
        connector_num_attention_heads=c["video_connector_num_attention_heads"],
        connector_attention_head_dim=c["video_connector_attention_head_dim"],
        connector_num_layers=c["video_connector_num_layers"],
        audio_connector_num_attention_heads=c["audio_connector_num_attention_heads"],
        audio_connector_attention_head_dim=c["audio_connector_attention_head_dim"],
        audio_connector_num_layers=c["audio_connector_num_layers"],
        connector_apply_gated_attention=c["video_gated_attn"],
        connector_positional_embedding_max_pos=[c["connector_rope_base_seq_len"]],
    )
    if c["per_modality_projections"]:  # ltx-core's 2.3+ feature extractor declaration
        out.update(caption_proj_before_connector=True, caption_projection_first_linear=False,
                   caption_proj_input_norm=False, caption_projection_second_linear=False)
    return out


def vae_section(v: dict) -> dict:
    """ltx-core's ``vae`` config (block lists, listed from the pixel side) of a diffusers AutoencoderKLLTX2Video one."""
    enc, ch = [], v["latent_channels"]
    for i, width in enumerate(v["block_out_channels"]):
        enc += [["res_x", {"num_layers": v["layers_per_block"][i]}],
                [DOWN[v["downsample_type"][i]], {"multiplier": width // ch}]]
        ch = width
    enc.append(["res_x", {"num_layers": v["layers_per_block"][-1]}])
    n, dec = len(v["decoder_block_out_channels"]), []

    def res(i):
        return ["res_x", {"num_layers": v["decoder_layers_per_block"][i], "inject_noise": v["decoder_inject_noise"][i]}]

    for i in range(n):
        dec += [res(i), [UP[v["upsample_type"][n - 1 - i]],
                         {"multiplier": v["upsample_factor"][i], "residual": v["upsample_residual"][i]}]]
    dec.append(res(n))
    base = v["decoder_block_out_channels"][0] // v["upsample_factor"][0]
    return {"_class_name": "CausalVideoAutoencoder", "dims": 3, "latent_channels": v["latent_channels"],
            "out_channels": v["out_channels"], "patch_size": v["patch_size"], "encoder_blocks": enc,
            "decoder_blocks": dec, "decoder_base_channels": base, "norm_layer": "pixel_norm",
            "latent_log_var": "uniform", "causal_decoder": v["decoder_causal"],
            "timestep_conditioning": v["timestep_conditioning"],
            "spatial_padding_mode": v["decoder_spatial_padding_mode"],
            "encoder_spatial_padding_mode": v["encoder_spatial_padding_mode"]}


def audio_sections(a: dict, voc: dict) -> dict:
    """ltx-core's ``audio_vae`` and ``vocoder`` configs of the diffusers ones (a plain HiFi-GAN vocoder)."""
    dd = {"ch": a["base_channels"], "out_ch": a["output_channels"], "ch_mult": a["ch_mult"],
          "num_res_blocks": a["num_res_blocks"], "attn_resolutions": a["attn_resolutions"],
          "in_channels": a["in_channels"], "resolution": a["resolution"], "z_channels": a["latent_channels"],
          "norm_type": a["norm_type"], "causality_axis": a["causality_axis"], "dropout": a["dropout"],
          "mid_block_add_attention": a["mid_block_add_attention"], "double_z": a["double_z"], "mel_bins": a["mel_bins"]}
    assert voc["act_fn"] == "leaky_relu" and voc["final_act_fn"] == "tanh"
    return {"audio_vae": {"model": {"params": {"ddconfig": dd, "sampling_rate": a["sample_rate"]}},
                          "preprocessing": {"stft": {"hop_length": a["mel_hop_length"], "causal": a["is_causal"]},
                                            "mel": {"n_mel_channels": a["mel_bins"]}}},
            "vocoder": {"resblock": "1", "stereo": True, "upsample_rates": voc["upsample_factors"],
                        "upsample_kernel_sizes": voc["upsample_kernel_sizes"],
                        "resblock_kernel_sizes": voc["resnet_kernel_sizes"],
                        "resblock_dilation_sizes": voc["resnet_dilations"],
                        "upsample_initial_channel": voc["hidden_channels"],
                        "output_sampling_rate": voc["output_sampling_rate"], "use_tanh_at_final": True}}


def _load(folder, name):
    from safetensors.numpy import load_file

    files = sorted((folder / name).glob("*.safetensors"))
    assert len(files) == 1, files
    return load_file(str(files[0]))


def _config(folder, name):
    return json.loads((folder / name / "config.json").read_text())


def _save(path, tensors, **metadata):
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})


def write_release(ckpt, root, generation):
    """The release layout of the diffusers folder ``ckpt`` under ``root`` (LTX-2.5: one file per part and the
    packed Gemma file; LTX-2.0: one file and the Gemma-3 folders); returns the written state dicts by part."""
    t, c = _config(ckpt, "transformer"), _config(ckpt, "connectors")
    v, a, voc = _config(ckpt, "vae"), _config(ckpt, "audio_vae"), _config(ckpt, "vocoder")
    connectors = _load(ckpt, "connectors")
    proj = {orig.connector_key(k): x for k, x in connectors.items() if "text_proj_in." in k}
    dit = {orig.dit_key(k): x for k, x in _load(ckpt, "transformer").items()}
    dit.update({orig.connector_key(k): x for k, x in connectors.items() if "text_proj_in." not in k})
    vae = {orig.vae_key(k, len(v["block_out_channels"])): x for k, x in _load(ckpt, "vae").items()}
    n = vae["vae.per_channel_statistics.mean-of-means"].shape[0]
    vae["vae.per_channel_statistics.channel"] = np.arange(n, dtype=np.float32)  # unused statistics ltx-core keeps
    vae["vae.per_channel_statistics.mean-of-stds"] = np.ones(n, np.float32)
    audio = {orig.audio_vae_key(k): x for k, x in _load(ckpt, "audio_vae").items()}
    audio.update({orig.vocoder_key(k): x for k, x in _load(ckpt, "vocoder").items()})
    sections = {"transformer": transformer_section(t, c), "vae": vae_section(v), **audio_sections(a, voc)}
    if generation == "ltx2.0":
        _save(root / MONOLITH, {**dit, **proj, **vae, **audio}, config=sections, model_version="2.0.0")
        for part in ("text_encoder", "tokenizer"):
            shutil.copytree(ckpt / part, root / part)
        return {"transformer": {**dit, **proj}, "vae": vae, "audio": audio}
    # the Gemma file: ComfyUI's flat language-model keys, the projections, tokenizer.json and sidecars as bytes
    gemma = {re.sub(r"^model\.language_model\.", "model.", k): x for k, x in _load(ckpt, "text_encoder").items()}
    gemma.update(proj)
    gemma["tokenizer_json"] = np.frombuffer((ckpt / "tokenizer" / "tokenizer.json").read_bytes(), np.uint8)
    for side in ("tokenizer_config.json", "special_tokens_map.json"):
        if (ckpt / "tokenizer" / side).exists():
            gemma["hf_asset__" + side] = np.frombuffer((ckpt / "tokenizer" / side).read_bytes(), np.uint8)
    parts = {transformer_file(MODEL_ID): (dit, ("transformer",)),
             "vae/ltx-2.5-video-vae-conv-bf16.safetensors": (vae, ("vae",)),
             "vae/ltx-2.5-audio-vae-bf16.safetensors": (audio, ("audio_vae", "vocoder"))}
    for rel, (tensors, names) in parts.items():
        _save(root / rel, tensors, config={k: sections[k] for k in names}, model_version="2.5.0")
    _save(root / "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors", gemma,
          gemma_config=_config(ckpt, "text_encoder"))
    return {"transformer": dit, "vae": vae, "audio": audio}


def _twin(tmp_path_factory, generation):
    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline

    tmp = tmp_path_factory.mktemp(generation)
    _, ckpt = build_tiny_ltx2_pipeline(tmp / "tiny", generation, seed=7)
    release = tmp / "release"
    return ckpt, release, write_release(ckpt, release, generation)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """LTX-2.5: (diffusers folder, release folder, the release's state dicts)."""
    return _twin(tmp_path_factory, "ltx2.5")


@pytest.fixture(scope="module")
def twin20(tmp_path_factory):
    """LTX-2.0: (diffusers folder, release folder holding ltx-2-19b-dev.safetensors, its state dicts)."""
    return _twin(tmp_path_factory, "ltx2.0")


def _spec(model_id=MODEL_ID):
    return types.SimpleNamespace(id=model_id)


def test_fixture_renaming_is_diffusers_own(twin):
    """diffusers' single-file conversions map the written DiT, VAE and audio-VAE keys back onto the diffusers ones
    (plus what its conversion script's tables add over 0.42.1's single-file ones: the 2.3+ prompt AdaLNs and the
    timestep-conditioned decoder's ``last_*`` names)."""
    from diffusers.loaders.single_file_utils import (convert_ltx2_audio_vae_to_diffusers,
                                                     convert_ltx2_transformer_to_diffusers,
                                                     convert_ltx2_vae_to_diffusers)

    ckpt, _, written = twin
    dit = convert_ltx2_transformer_to_diffusers(dict(written["transformer"]))
    dit = {k.replace("prompt_adaln_single", "prompt_adaln"): x for k, x in dit.items()}
    assert set(dit) == set(_load(ckpt, "transformer"))
    vae = {k.replace("last_time_embedder", "time_embedder").replace("last_scale_shift_table", "scale_shift_table")
           for k in convert_ltx2_vae_to_diffusers(dict(written["vae"]))}
    assert vae == set(_load(ckpt, "vae"))
    audio = {k: x for k, x in written["audio"].items() if k.startswith("audio_vae.")}
    assert set(convert_ltx2_audio_vae_to_diffusers(audio)) == set(_load(ckpt, "audio_vae"))


def _fields(cfg) -> dict:
    """A config object's fields (the latent statistics the loaders fill left out), lists as tuples."""
    import dataclasses

    def frozen(v):
        return tuple(frozen(x) for x in v) if isinstance(v, (list, tuple)) else v

    skip = ("latents_mean", "latents_std")
    return {f.name: frozen(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in skip}


def _same_params(a, b) -> None:
    from vidax_core.nn.state import flat_state

    pa, pb = flat_state(a), flat_state(b)
    assert set(pa) == set(pb)
    for k in pa:
        x, y = np.asarray(pa[k]), np.asarray(pb[k])
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), k


def _loaders():
    """component -> (config dict -> config object, (config object, config dict, tensors) -> live module)."""
    from vidax_ltx.convert_ltx2 import load_ltx2_dit
    from vidax_ltx.ltx2_audio import load_audio_vocoder
    from vidax_ltx.ltx2_audio_vae import LTX2AudioVAEConfig, load_audio_vae
    from vidax_ltx.ltx2_connectors import LTX2ConnectorsConfig, load_connectors
    from vidax_ltx.ltx2_dit import LTX2DiTConfig
    from vidax_ltx.ltx2_vae import LTX2VAEConfig, load_ltx2_vae
    from vidax_ltx.ltx2_vocoder import LTX2VocoderConfig

    return {"transformer": (LTX2DiTConfig.from_config, lambda c, raw, t: load_ltx2_dit(c, t)),
            "connectors": (LTX2ConnectorsConfig.from_config, lambda c, raw, t: load_connectors(c, t)),
            "vae": (LTX2VAEConfig.from_config, lambda c, raw, t: load_ltx2_vae(c, t)),
            "audio_vae": (LTX2AudioVAEConfig.from_config, lambda c, raw, t: load_audio_vae(c, t)),
            "vocoder": (LTX2VocoderConfig.from_config, lambda c, raw, t: load_audio_vocoder(raw, t))}


@pytest.mark.parametrize("generation", ["ltx2.5", "ltx2.0"])
@pytest.mark.parametrize("component", ["transformer", "connectors", "vae", "audio_vae", "vocoder"])
def test_release_loads_exactly_the_params_of_the_diffusers_twin(request, generation, component):
    """Each part's config and every parameter leaf (bitwise) equal the diffusers folder's."""
    from vidax_core.io.checkpoint import Checkpoint

    ckpt, release, _ = request.getfixturevalue("twin" if generation == "ltx2.5" else "twin20")
    model_id = MODEL_ID if generation == "ltx2.5" else MODEL_ID_20
    a, b = Checkpoint(str(ckpt)), open_release(_spec(model_id), str(release))
    configure, load = _loaders()[component]
    raw_a, raw_b = a.config(component), b.config(component)
    cfg_a, cfg_b = configure(raw_a), configure(raw_b)
    assert _fields(cfg_a) == _fields(cfg_b)
    _same_params(load(cfg_a, raw_a, a.tensors(component)), load(cfg_b, raw_b, b.tensors(component)))


def _bigvgan(c: dict, p: str) -> dict:
    """ltx-core's BigVGAN-v2 generator config of a diffusers LTX2VocoderWithBWE config's fields prefixed ``p``."""
    return {"resblock": "AMP1", "activation": "snakebeta", "stereo": True, "upsample_rates": c[p + "upsample_factors"],
            "upsample_kernel_sizes": c[p + "upsample_kernel_sizes"],
            "resblock_kernel_sizes": c[p + "resnet_kernel_sizes"], "resblock_dilation_sizes": c[p + "resnet_dilations"],
            "upsample_initial_channel": c[p + "hidden_channels"]}


def test_bwe_vocoder_loads_exactly_the_params_of_its_diffusers_twin(twin, tmp_path):
    """The LTX-2.3+ vocoder with bandwidth extension (what LTX-2.5's audio file holds: ltx-core's names under
    ``vocoder.vocoder.`` / ``vocoder.bwe_generator.``, its nested ``vocoder`` / ``bwe`` config) loads to the config
    and every parameter of diffusers' ``LTX2VocoderWithBWE``."""
    from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tiny.ltx2 import VOCODER_BWE
    from vidax_ltx.ltx2_audio import load_audio_vocoder
    from vidax_ltx.ltx2_vocoder_bwe import LTX2VocoderBWEConfig

    _, release, written = twin
    ref = LTX2VocoderWithBWE(**VOCODER_BWE).eval()
    randomize_(ref, seed=9)
    ref.save_pretrained(str(tmp_path / "vocoder"))
    c, tensors = _config(tmp_path, "vocoder"), _load(tmp_path, "vocoder")
    assert c["window_length"] == c["filter_length"]  # ltx-core's MelSTFT takes one n_fft for both
    bwe = {**_bigvgan(c, "bwe_"), "n_fft": c["filter_length"], "hop_length": c["hop_length"],
           "num_mels": c["num_mel_channels"], "input_sampling_rate": c["input_sampling_rate"],
           "output_sampling_rate": c["output_sampling_rate"]}
    folder = tmp_path / "release"
    shutil.copytree(release, folder)
    audio = {k: x for k, x in written["audio"].items() if k.startswith("audio_vae.")}
    audio.update({orig.vocoder_key(k): x for k, x in tensors.items()})
    section = open_release(_spec(), str(release))._meta("audio_vae", "audio_vae")
    _save(folder / "vae/ltx-2.5-audio-vae-bf16.safetensors", audio,
          config={"audio_vae": section, "vocoder": {"vocoder": _bigvgan(c, ""), "bwe": bwe}})
    b = open_release(_spec(), str(folder))
    raw = b.config("vocoder")
    assert _fields(LTX2VocoderBWEConfig.from_config(raw)) == _fields(LTX2VocoderBWEConfig.from_config(c))
    _same_params(load_audio_vocoder(raw, b.tensors("vocoder")), load_audio_vocoder(c, tensors))


def test_config_comparison_sees_a_wrong_mapping(twin):
    """The config check can fail: the release's metadata with the RoPE precision or layout flipped (a reader that
    mistook ``frequencies_precision`` / ``rope_type``) gives a DiT config unlike the diffusers folder's."""
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_ltx import ltx2_release_config as rc
    from vidax_ltx.ltx2_dit import LTX2DiTConfig

    ckpt, release, _ = twin
    a, b = Checkpoint(str(ckpt)), open_release(_spec(), str(release))
    t, keys = b._meta("transformer", "transformer"), b.read_tensors("transformer")
    want = _fields(LTX2DiTConfig.from_config(a.config("transformer")))
    width = rc.gemma_width(b.config("text_encoder"))
    assert _fields(LTX2DiTConfig.from_config(rc.dit_config(t, keys, keys.shape, width))) == want
    flips = {"frequencies_precision": "float32" if t["frequencies_precision"] == "float64" else "float64",
             "rope_type": "split" if t["rope_type"] == "interleaved" else "interleaved"}
    for key, value in flips.items():
        got = _fields(LTX2DiTConfig.from_config(rc.dit_config({**t, key: value}, keys, keys.shape, width)))
        assert got != want, key


def test_packed_gemma_and_tokenizer_equal_the_folders(twin):
    """The Gemma file's language model (ComfyUI's flat keys) and its packed tokenizer answer as the diffusers
    folder's text_encoder/ and tokenizer/."""
    from vidax_core.encoders.tokenizer import TextTokenizer
    from vidax_core.io.checkpoint import Checkpoint

    ckpt, release, _ = twin
    a, b = Checkpoint(str(ckpt)), open_release(_spec(), str(release))
    ta, tb = a.tensors("text_encoder"), b.tensors("text_encoder")
    assert set(ta) == set(tb)
    assert all(np.array_equal(np.asarray(ta[k]), np.asarray(tb[k])) for k in ta)
    assert b.config("text_encoder")["model_type"] == a.config("text_encoder")["model_type"]
    ref, tok = TextTokenizer.from_dir(a.require("tokenizer")), b.open_tokenizer()
    prompts = ["a small red fox barks in the snow", ""]
    for x, y in zip(ref(prompts, 16), tok(prompts, 16)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("generation", ["ltx2.5", "ltx2.0"])
def test_run_from_the_release_equals_the_diffusers_twin(request, generation):
    """``vidax run`` of the dev recipe (CFG, STG, modality guidance, dynamic shift) from the release folder gives
    the diffusers folder's video and audio latents exactly."""
    from vidax_core.testing.runs import run_many

    ckpt, release, _ = request.getfixturevalue("twin" if generation == "ltx2.5" else "twin20")
    model_id = MODEL_ID if generation == "ltx2.5" else MODEL_ID_20
    base = [f"model.id={model_id}", "prompt=a small red fox barks in the snow", "negative_prompt=blurry",
            "sampling.num_steps=2", "sampling.height=64", "sampling.width=64", "sampling.num_frames=9",
            "sampling.max_sequence_length=16", "options.spatio_temporal_guidance_blocks=[1]", "parallel.dp=1"]
    runs = run_many(base, {"diffusers": (f"model.checkpoint={ckpt}",), "release": (f"model.checkpoint={release}",)},
                    devices=1)
    assert "error" not in runs["release"], runs["release"]
    print(f"{generation} release vs diffusers run: rel {runs['release']['rel']:.1e}")
    assert runs["release"]["rel"] == 0.0


def test_refusals(tmp_path, twin):
    """A folder of another layout is declined; a release missing the id's DiT file (also through ``vidax run``), or
    holding only the diffusion-decoder VAE, is refused in one line naming the file to download; the LTX-2.0 id
    refuses the LTX-2.5 release."""
    _, release, _ = twin
    assert open_release(_spec(), str(tmp_path)) is None
    bad = tmp_path / "no_dit"
    shutil.copytree(release, bad)
    (bad / transformer_file(MODEL_ID)).unlink()
    for model_id, want in ((MODEL_ID, transformer_file(MODEL_ID)),
                           ("ltx-2.5-22b-distilled", transformer_file("ltx-2.5-22b-distilled")),
                           ("ltx-2-19b-dev", "ltx-2-19b-dev.safetensors")):
        with pytest.raises(UserError) as err:
            open_release(_spec(model_id), str(bad))
        assert want in str(err.value) and "\n" not in str(err.value), str(err.value)
    proc = vidax("run", f"model.id={MODEL_ID}", f"model.checkpoint={bad}", "prompt=a fox", "sampling.num_frames=9",
                 "--dry-run", cwd=tmp_path)  # the CLI: one error line
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("error:") and transformer_file(MODEL_ID) in last, proc.stderr
    shutil.copy(release / transformer_file(MODEL_ID), bad / transformer_file(MODEL_ID))
    vae = bad / "vae" / "ltx-2.5-video-vae-conv-bf16.safetensors"
    vae.rename(bad / "vae" / "ltx-2.5-video-vae-bf16.safetensors")
    with pytest.raises(UserError, match="ltx-2.5-video-vae-conv-bf16.safetensors.*diffusion decoder"):
        open_release(_spec(), str(bad))


def test_model_files_read_as_the_release_folder(twin):
    """LTX-2.5's four files named with ``model.files`` (the ``open_files`` hook) read as the release folder does:
    every part's config and tensor names."""
    from vidax_core.api import resolve_config
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins

    _, release, _ = twin
    files = {"transformer": transformer_file(MODEL_ID),
             "text_encoder": "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors",
             "vae": "vae/ltx-2.5-video-vae-conv-bf16.safetensors",
             "audio_vae": "vae/ltx-2.5-audio-vae-bf16.safetensors"}
    plugins = get_plugins()
    cfg = resolve_config(MODEL_ID, [f"model.files={json.dumps({k: str(release / v) for k, v in files.items()})}",
                                    "sampling.num_frames=9", "options.spatio_temporal_guidance_blocks=[1]"], plugins)
    ckpt, ref = checkpoint_for_run(cfg, plugins.registry.get(MODEL_ID), plugins), open_release(_spec(), str(release))
    for part in ("transformer", "connectors", "vae", "audio_vae", "vocoder", "text_encoder"):
        mine, want = ckpt.config(part), ref.config(part)
        assert {k: v for k, v in mine.items() if k != "_vidax_source"} == {k: v for k, v in want.items()
                                                                           if k != "_vidax_source"}, part
        assert set(ckpt.tensors(part)) == set(ref.tensors(part)), part
