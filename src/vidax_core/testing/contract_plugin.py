"""A toy model family that exercises every point of the run contract (part of the test kit; tests/test_contract.py
runs it).

Model id ``contract-toy``, registered by :class:`ContractPlugin` (a :class:`vidax_core.FamilyPlugin`, as every family
is written). Its denoiser is a per-token MLP whose modulation reads a pytree text context (hidden
states + key-padding mask, possibly of a different length per prompt), an embedded guidance input, a per-branch
conditioning input (a clip's mean colour; black for the negative branch) and per-token timesteps; it carries a
pytree ``{"video", "audio"}`` through two stacked block groups with a transition between them. With a clean first
frame it also takes the conditioning's token mask and gives those tokens a known velocity itself (under offload the
mask goes from ``pre`` to ``post`` in the aux). Latents are packed (B, S, C) like LTX's, optionally with an audio
stream. Every behaviour is switched by ``options``.

:func:`numpy_reference` is the same generation written as a plain float64 numpy loop, independent of the
pipeline: tests compare ``vidax run`` with it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidax_core.family import FamilyPlugin
from vidax_core.registry import Option

ID = "contract-toy"
C, D, E, CA = 4, 16, 8, 3  # latent channels, model width, text width, audio latent channels
GROUPS = {"blocks_a": 2, "blocks_b": 3}
AUDIO_PER_FRAME = 4
SAMPLE_RATE = 8000
GUIDANCE_MODES = ("none", "cfg", "cfg_cond", "rescale", "stg", "embedded", "embedded_true_cfg", "dynamic")

OPTIONS = {
    "guidance_mode": Option("cfg", str, "which guidance strategy", choices=GUIDANCE_MODES),
    "guidance_rescale": Option(0.7, float, "phi of guidance rescale (mode rescale)"),
    "stg_scale": Option(0.8, float, "scale of the perturbed branch (mode stg)"),
    "true_cfg_scale": Option(2.5, float, "negative-prompt CFG on top of embedded guidance"),
    "audio": Option(False, bool, "denoise an audio latent stream too"),
    "unpadded": Option(False, bool, "each prompt keeps its own length (branches differ in shape)"),
    "first_frame": Option(False, bool, "frame 0 is clean: per-token timesteps, velocity (by the denoiser, from "
                                       "the keep mask) and latents replaced"),
    "sigmas": Option(None, list[float] | None, "explicit sigma list (distilled schedule)"),
    "declare_all_groups": Option(True, bool, "the model lists every stacked group in block_groups"),
    "stream_groups": Option(None, list[str] | None, "the groups DitBuild.block_counts names, those offload streams "
                                                    "(null = all)"),
    "bin": Option(None, list[int] | None, "resolution binning to this one [height, width] bin (null = none)"),
}


PRESET = {"negative_prompt": "blurry", "sampling": {"num_steps": 4, "guidance_scale": 3.0, "height": 8, "width": 8,
                                                    "num_frames": 3, "max_sequence_length": 12},
          "output": {"fps": 8}, "runtime": {"compilation_cache": False}}


def register(plugins) -> None:
    plugins.add(ContractPlugin(), name="contract")


# ---- weights and the toy forward, in jax (the plugin) and numpy (the reference) --------------------------------


def make_checkpoint(folder: str, seed: int = 0) -> str:
    """A diffusers-layout folder: transformer weights, a flow-Euler scheduler config, model_index.json."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    w = {
        "in_proj": rng.normal(0, 0.5, (C, D)), "t_freq": rng.uniform(0.5, 3.0, (D,)),
        "ctx_proj": rng.normal(0, 0.5, (E, D)), "guid_proj": rng.normal(0, 0.3, (D,)),
        "vid_proj": rng.normal(0, 1.0, (3, D)), "audio_in": rng.normal(0, 0.5, (CA, D)),
        "audio_out": rng.normal(0, 0.5, (D, CA)), "out_proj": rng.normal(0, 0.5, (D, C)),
    }
    for g, n in GROUPS.items():
        w[f"{g}.w"] = rng.normal(0, 0.4, (n, D, D))
        w[f"{g}.b"] = rng.normal(0, 0.2, (n, D))
    os.makedirs(os.path.join(folder, "transformer"), exist_ok=True)
    os.makedirs(os.path.join(folder, "scheduler"), exist_ok=True)
    save_file({k: v.astype(np.float32) for k, v in w.items()},
              os.path.join(folder, "transformer", "diffusion_pytorch_model.safetensors"))
    with open(os.path.join(folder, "transformer", "config.json"), "w") as f:
        json.dump({"_class_name": "ContractToy"}, f)
    with open(os.path.join(folder, "scheduler", "scheduler_config.json"), "w") as f:
        json.dump({"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0}, f)
    with open(os.path.join(folder, "model_index.json"), "w") as f:
        json.dump({"_class_name": "ContractToyPipeline", "transformer": ["x", "y"], "scheduler": ["x", "y"]}, f)
    return folder


def embed_text(prompt: str, length: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic toy text encoder: one row per byte, (L, E) float32 and a (L,) mask."""
    codes = np.frombuffer(prompt.encode(), np.uint8).astype(np.float64)[: length or None]
    n = len(codes) if length is None else length
    hidden = np.zeros((max(n, 1), E))
    mask = np.zeros((max(n, 1),), bool)
    k = np.arange(E)
    for i, c in enumerate(codes):
        hidden[i] = np.sin(c * (k + 1) * 0.05)
        mask[i] = True
    return hidden.astype(np.float32), mask


def _modulation(xp, w, t, ctx, guidance, video_feat):
    """(B, D) or per token (B, S, D) modulation from timesteps, pooled masked text, guidance and the clip colour."""
    hidden, mask = ctx["hidden"], ctx["mask"]
    m = mask.astype(hidden.dtype)[..., None]
    pooled = (hidden * m).sum(1) / xp.maximum(m.sum(1), 1.0)
    extra = pooled @ w["ctx_proj"] + guidance[:, None] * w["guid_proj"] + video_feat @ w["vid_proj"]
    temb = xp.sin(t[..., None] / 1000.0 * w["t_freq"])
    return temb + (extra[:, None] if t.ndim == 2 else extra)


def _block(xp, h, mod, wl, bl):
    return h + xp.tanh(h @ wl + bl + mod)


def toy_forward(xp, w, x, t, ctx, guidance, video_feat, skip_b=False):
    """The whole model in one function for ``xp`` = numpy or jax.numpy; ``x`` is an array or {"video", "audio"}."""
    video = x["video"] if isinstance(x, dict) else x
    mod = _modulation(xp, w, t, ctx, guidance, video_feat)
    tok_mod = mod if mod.ndim == 3 else mod[:, None]
    h = {"video": video @ w["in_proj"]}
    if isinstance(x, dict):
        h["audio"] = x["audio"] @ w["audio_in"]
    for g in GROUPS:
        if g == "blocks_b" and skip_b:
            continue
        if g == "blocks_b":
            h = _transition(xp, h)
        for i in range(GROUPS[g]):
            wl, bl = w[f"{g}.w"][i], w[f"{g}.b"][i]
            h = {k: _block(xp, v, tok_mod if k == "video" else tok_mod.mean(1, keepdims=True), wl, bl)
                 for k, v in h.items()}
    out = {"video": h["video"] @ w["out_proj"]}
    if isinstance(x, dict):
        out["audio"] = h["audio"] @ w["audio_out"]
        return out
    return out["video"]


def _with_clean_velocity(out, keep):
    """The prediction with the known velocity 0.25 on the tokens ``keep`` (B, S) marks 0 (the clean frame): the
    toy's reference fixes its conditioning tokens' prediction, so its denoiser does, given ``keep``."""
    import jax.numpy as jnp

    if keep is None:
        return out
    video = out["video"] if isinstance(out, dict) else out
    video = jnp.where(keep[..., None] > 0, video, jnp.asarray(0.25, video.dtype))
    return {**out, "video": video} if isinstance(out, dict) else video


def _transition(xp, h):
    if "audio" not in h:
        return {"video": h["video"] * 0.5}
    return {"video": h["video"] * 0.5 + h["audio"].mean(1, keepdims=True), "audio": h["audio"]}


# ---- the NNX module --------------------------------------------------------------------------------------------


def _module(declare_all: bool):
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.nn.layers import LAYERS, param

    class Group(nnx.Module):
        def __init__(self, n: int):
            self.w = param(jnp.zeros((n, D, D)), (LAYERS, "embed", "mlp"))
            self.b = param(jnp.zeros((n, D)), (LAYERS, "mlp"))

    class ToyDiT(nnx.Module):
        block_groups = tuple(GROUPS) if declare_all else ("blocks_a",)

        def __init__(self):
            z = jnp.zeros
            self.in_proj, self.t_freq = param(z((C, D)), (None, "embed")), param(z((D,)), ("embed",))
            self.ctx_proj, self.guid_proj = param(z((E, D)), (None, "embed")), param(z((D,)), ("embed",))
            self.vid_proj, self.audio_in = param(z((3, D)), (None, "embed")), param(z((CA, D)), (None, "embed"))
            self.audio_out, self.out_proj = param(z((D, CA)), ("embed", None)), param(z((D, C)), ("embed", None))
            self.blocks_a, self.blocks_b = Group(GROUPS["blocks_a"]), Group(GROUPS["blocks_b"])

        def weights(self, blocks: bool = True) -> dict:
            w = {k: getattr(self, k)[...] for k in ("in_proj", "t_freq", "ctx_proj", "guid_proj", "vid_proj",
                                                   "audio_in", "audio_out", "out_proj")}
            if blocks:  # the offload executor's pre/post see the groups only as shapes
                for g in GROUPS:
                    w[f"{g}.w"], w[f"{g}.b"] = getattr(self, g).w[...], getattr(self, g).b[...]
            return w

        def __call__(self, x, t, ctx, guidance=None, video_feat=None, skip_b=False, keep=None):
            b = jax.tree.leaves(x)[0].shape[0]
            guidance = jnp.zeros((b,)) if guidance is None else guidance
            video_feat = jnp.zeros((b, 3)) if video_feat is None else video_feat
            return _with_clean_velocity(toy_forward(jnp, self.weights(), x, t, ctx, guidance, video_feat, skip_b), keep)

        # the staged forward the offload executor drives
        def pre(self, x, t, ctx, guidance=None, video_feat=None, skip_b=False, keep=None):
            b = jax.tree.leaves(x)[0].shape[0]
            guidance = jnp.zeros((b,)) if guidance is None else guidance
            video_feat = jnp.zeros((b, 3)) if video_feat is None else video_feat
            w = self.weights(blocks=False)
            mod = _modulation(jnp, w, t, ctx, guidance, video_feat)
            video = x["video"] if isinstance(x, dict) else x
            h = {"video": video @ w["in_proj"]}
            if isinstance(x, dict):
                h["audio"] = x["audio"] @ w["audio_in"]
            # "grid": a Python int the blocks reshape with (a token grid), kept static across offload's stages
            aux = {"mod": mod if mod.ndim == 3 else mod[:, None], "skip_b": jnp.asarray(skip_b),
                   "grid": (int(video.shape[1]),)}
            if keep is not None:
                aux["keep"] = keep
            return h, aux

        @staticmethod
        def run_block_group(name, graphdef, state, h, aux):
            g = nnx.merge(graphdef, state)
            n = g.w.shape[0]
            (tokens,) = aux["grid"]
            out = dict(h, video=h["video"].reshape(h["video"].shape[0], tokens, -1))  # a traced size would fail
            for i in range(n):
                out = {k: _block(jnp, v, aux["mod"] if k == "video" else aux["mod"].mean(1, keepdims=True),
                                 g.w[...][i], g.b[...][i]) for k, v in out.items()}
            if name == "blocks_b":  # the perturbed branch skips this group
                return jax.tree.map(lambda new, old: jnp.where(aux["skip_b"], old, new), out, h)
            return out

        def between_groups(self, before, after, h, aux):
            return jax.tree.map(lambda new, old: jnp.where(aux["skip_b"], old, new), _transition(jnp, h), h)

        def post(self, h, aux, latent_shape):
            w = self.weights(blocks=False)
            out = {"video": h["video"] @ w["out_proj"]}
            if "audio" in h:
                out["audio"] = h["audio"] @ w["audio_out"]
            return _with_clean_velocity(out if "audio" in h else out["video"], aux.get("keep"))

    return ToyDiT


@dataclass
class ToyText:
    length: int | None


class ToyVAE:
    """latent (f, h, w) = (frames, height / 2, width / 2); decode: sigmoid of the first three channels, upsampled."""

    def __init__(self, audio: bool):
        self.audio = audio

    def latent_shape(self, num_frames, height, width):
        return num_frames, height // 2, width // 2

    def decode_video(self, latents, on_chunk=None, **params):
        from vidax_core.model_api import Decoded

        video = latents["video"] if isinstance(latents, dict) else latents
        frames = decode_frames(np.asarray(video), self.grid)
        if on_chunk:
            on_chunk(1, 1)
        if isinstance(latents, dict):
            return Decoded(frames, decode_audio(np.asarray(latents["audio"])), SAMPLE_RATE)
        return frames


def decode_frames(video: np.ndarray, grid) -> np.ndarray:
    f, h, w = grid
    x = video.reshape(video.shape[0], f, h, w, C)[..., :3]
    x = 1.0 / (1.0 + np.exp(-x))
    return np.repeat(np.repeat(x, 2, axis=2), 2, axis=3).astype(np.float32)


def decode_audio(audio: np.ndarray) -> np.ndarray:
    return np.tanh(np.repeat(audio.mean(-1, keepdims=True), 64, axis=1) * 0.5).astype(np.float32)


def clean_first_frame(grid) -> np.ndarray:
    f, h, w = grid
    return np.linspace(-1.0, 1.0, h * w * C, dtype=np.float32).reshape(1, h * w, C)


class ContractPlugin(FamilyPlugin):
    """The toy family: every hook the contract exercises, switched by ``options``."""

    family = "contract"
    models = ({"id": ID, "tasks": ("t2v", "v2v"), "preset": PRESET},)
    options = OPTIONS

    def build_dit(self, spec, ckpt, run):
        from vidax_core.model_api import DitBuild

        ctor = _module(run.options["declare_all_groups"])
        audio = run.options["audio"]

        def shapes(batch, grid):
            f, h, w = grid
            video = (batch, f * h * w, C)
            return {"video": video, "audio": (batch, f * AUDIO_PER_FRAME, CA)} if audio else video

        streamed = run.options["stream_groups"] or list(GROUPS)
        return DitBuild(ctor=lambda: ctor(), config=None, in_channels=C, heads=2, patch_size=(1, 1, 1),
                        block_counts={g: n for g, n in GROUPS.items() if g in streamed}, latent_shapes=shapes)

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        return {path: np.asarray(tensors[".".join(map(str, path))]) for path in abstract}

    def build_text_encoder(self, spec, ckpt, run, mesh):
        return ToyText(None if run.options["unpadded"] else run.sampling.max_sequence_length)

    def encode_prompt(self, spec, encoder, prompts, run):
        rows = [embed_text(p, encoder.length) for p in prompts]
        if encoder.length is None:  # unpadded: one context per prompt, each its own length (branches then run apart)
            return [{"hidden": h[None], "mask": m[None]} for h, m in rows]
        return {"hidden": np.stack([h for h, _ in rows]), "mask": np.stack([m for _, m in rows])}

    def build_vae(self, spec, ckpt, run):
        vae = ToyVAE(run.options["audio"])
        vae.grid = vae.latent_shape(run.sampling.num_frames, run.sampling.height, run.sampling.width)
        return vae

    def guidance(self, spec, ckpt, run):
        from vidax_core import guidance as G

        o, g = run.options, float(run.sampling.guidance_scale)
        mode = o["guidance_mode"]
        return {
            "none": lambda: G.NoGuidance(),
            "cfg": lambda: G.ClassifierFree(scale=g),
            "cfg_cond": lambda: G.ClassifierFree(scale=g, formula="cond"),
            "rescale": lambda: G.ClassifierFree(scale=g, rescale_phi=o["guidance_rescale"]),
            "stg": lambda: G.SpatioTemporal(scale=g, stg_scale=o["stg_scale"], perturb={"skip_b": True}),
            "embedded": lambda: G.Embedded(scale=g),
            "embedded_true_cfg": lambda: G.Embedded(scale=g, true_cfg_scale=o["true_cfg_scale"]),
            "dynamic": lambda: G.ClassifierFree(scale=lambda t: 1.0 + g * t / 1000.0),
        }[mode]()

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        sigmas = run.options["sigmas"]
        return {"sigmas": sigmas} if sigmas else None

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        import jax.numpy as jnp

        from vidax_core.io.clip import read_video
        from vidax_core.model_api import Conditioning

        arrays: dict[str, Any] = {}
        kwargs: tuple[str, ...] = ()
        if run.video is not None:
            clip = read_video(run.video, height=run.sampling.height, width=run.sampling.width)
            arrays["video_feat"] = clip.mean(axis=(0, 1, 2))[None].astype(np.float32)
            kwargs = ("video_feat",)
        if not run.options["first_frame"]:
            return Conditioning(arrays=arrays, model_kwargs=kwargs) if arrays else None
        f, h, w = latent_shape
        n0 = h * w
        arrays["clean"] = clean_first_frame(latent_shape)
        arrays["keep"] = np.concatenate([np.zeros((1, n0)), np.ones((1, (f - 1) * n0))], axis=1).astype(np.float32)

        def video_of(x):
            return x["video"] if isinstance(x, dict) else x

        def with_video(x, v):
            return {**x, "video": v} if isinstance(x, dict) else v

        def substitute(x, a):
            v = video_of(x)
            return with_video(x, v.at[:, :n0].set(jnp.broadcast_to(a["clean"], v[:, :n0].shape).astype(v.dtype)))

        def prepare(x, t, a):
            return substitute(x, a), t * a["keep"]  # per-token timesteps: the clean frame's tokens get t = 0

        # "keep" goes to the denoiser too, which gives the clean frame a known velocity
        return Conditioning(arrays=arrays, model_kwargs=kwargs + ("keep",), prepare=prepare,
                            select_update=lambda new, old, t, a: substitute(new, a),
                            per_token_update="video" if run.options["audio"] else True)

    def resolution_binning(self, spec, ckpt, run):
        from vidax_core.binning import ResolutionBins

        size = run.options["bin"]
        return None if size is None else ResolutionBins.of({"1.0": size}, name="toy")


# ---- the reference: the same generation as a plain float64 numpy loop ------------------------------------------


def numpy_reference(ckpt_folder: str, run, noise: Any, sigmas: np.ndarray, video_feat: np.ndarray | None = None):
    """Final latents of the toy run in float64, from the same initial noise and the plan's sigmas (N + 1)."""
    from safetensors.numpy import load_file

    w = {k: v.astype(np.float64) for k, v in
         load_file(os.path.join(ckpt_folder, "transformer", "diffusion_pytorch_model.safetensors")).items()}
    o, g = run.options, float(run.sampling.guidance_scale)
    mode = o["guidance_mode"]
    length = None if o["unpadded"] else run.sampling.max_sequence_length
    ctx = {}
    for name, text in (("cond", run.prompt), ("uncond", run.negative_prompt)):
        h, m = embed_text(text, length)
        ctx[name] = {"hidden": h[None].astype(np.float64), "mask": m[None]}
    grid = (run.sampling.num_frames, run.sampling.height // 2, run.sampling.width // 2)
    f, hh, ww = grid
    n0 = hh * ww
    if isinstance(noise, dict):
        x = {k: np.asarray(v, np.float64) for k, v in noise.items()}
    else:
        x = np.asarray(noise, np.float64)
    feat = np.zeros((1, 3)) if video_feat is None else video_feat[None].astype(np.float64)
    feat = {"cond": feat, "uncond": feat}
    keep = np.concatenate([np.zeros((1, n0)), np.ones((1, (f - 1) * n0))], axis=1)
    clean = clean_first_frame(grid).astype(np.float64)
    ts = sigmas[:-1] * 1000.0
    for i, t in enumerate(ts):
        xin = x
        tt = np.full((1,), t)
        if o["first_frame"]:
            xin = _np_sub(x, clean, n0)
            tt = t * keep
        emb = np.full((1,), g) if mode.startswith("embedded") else np.zeros((1,))

        def run_b(b, skip=False):
            return toy_forward(np, w, xin, tt, ctx[b if b != "perturbed" else "cond"], emb,
                               feat["uncond" if b == "uncond" else "cond"], skip)

        preds = {"cond": run_b("cond")}
        if mode not in ("none", "embedded"):
            preds["uncond"] = run_b("uncond")
        if mode == "stg":
            preds["perturbed"] = run_b("perturbed", True)
        if o["first_frame"]:
            preds = {k: _np_set(p, 0.25, n0) for k, p in preds.items()}
        c = preds["cond"]
        u = preds.get("uncond")

        def lin(fn, *ts_):
            return {k: fn(*[a[k] for a in ts_]) for k in ts_[0]} if isinstance(ts_[0], dict) else fn(*ts_)

        if mode == "none" or mode == "embedded":
            pred = c
        elif mode == "cfg":
            pred = lin(lambda c_, u_: u_ + g * (c_ - u_), c, u)
        elif mode == "cfg_cond":
            pred = lin(lambda c_, u_: c_ + g * (c_ - u_), c, u)
        elif mode == "dynamic":
            gt = 1.0 + g * t / 1000.0
            pred = lin(lambda c_, u_: u_ + gt * (c_ - u_), c, u)
        elif mode == "embedded_true_cfg":
            pred = lin(lambda c_, u_: u_ + o["true_cfg_scale"] * (c_ - u_), c, u)
        elif mode == "rescale":
            pred = lin(lambda c_, u_: _np_rescale(u_ + g * (c_ - u_), c_, o["guidance_rescale"]), c, u)
        elif mode == "stg":
            p = preds["perturbed"]
            pred = lin(lambda c_, u_, p_: u_ + g * (c_ - u_) + o["stg_scale"] * (c_ - p_), c, u, p)
        if o["first_frame"]:
            tok = tt / 1000.0  # per-token sigmas (1, S)
            below = np.where(sigmas[:, None, None] < tok[None] - 1e-6, sigmas[:, None, None], 0.0).max(0)
            dt = (below - tok)[..., None]
            x = {**x, "video": x["video"] + dt * pred["video"]} if isinstance(x, dict) else x + dt * pred
            if isinstance(x, dict):
                x["audio"] = x["audio"] + (sigmas[i + 1] - sigmas[i]) * pred["audio"]  # not per token: no t given
            x = _np_sub(x, clean, n0)
        else:
            x = lin(lambda a, p_: a + (sigmas[i + 1] - sigmas[i]) * p_, x, pred)
    return x


def _np_sub(x, clean, n0):
    if isinstance(x, dict):
        return {**x, "video": _np_sub(x["video"], clean, n0)}
    y = x.copy()
    y[:, :n0] = clean
    return y


def _np_set(p, value, n0):
    if isinstance(p, dict):
        return {**p, "video": _np_set(p["video"], value, n0)}
    y = p.copy()
    y[:, :n0] = value
    return y


def _np_rescale(guided, cond, phi):
    axes = tuple(range(1, guided.ndim))

    def std(a):
        return a.std(axis=axes, ddof=1, keepdims=True)

    return phi * guided * (std(cond) / std(guided)) + (1 - phi) * guided
