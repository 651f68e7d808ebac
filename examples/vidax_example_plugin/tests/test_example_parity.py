"""Parity of the denoiser with a reference written in PyTorch the way the checkpoint's layout implies (Conv2d
patch embedding, Linear weights (out, in), blocks.<i>.*). A real family compares with its diffusers model instead;
the toy has none, so its reference lives here. Both load the same checkpoint file.

The bound is derived, not guessed (the kit's ``assert_fp32_parity``, as every built-in family's component tests use
it): the float64 reference is the truth, and vidax in float32 may be a small factor times the two implementations'
own float32 errors away from it: the reference's (its float32 run against its float64 run) and vidax's
(``fp32_error``: how far vidax's output moves when every input and weight moves one float32 ulp).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file
from vidax_example_plugin import plugin
from vidax_example_plugin.tiny import write_tiny

from vidax_core import Checkpoint, Plugins, abstract_model, materialize
from vidax_core.testing import assert_fp32_parity, fp32_error, resolve


def linear(d_in: int, d_out: int) -> torch.nn.Linear:
    return torch.nn.Linear(d_in, d_out)


class TorchBlock(torch.nn.Module):
    def __init__(self, d: int, m: int, heads: int):
        super().__init__()
        self.heads = heads
        self.adaLN_modulation = linear(d, 6 * d)
        self.attn = torch.nn.ModuleDict({n: linear(d, d) for n in ("to_q", "to_k", "to_v", "to_out")})
        self.ff = torch.nn.ModuleDict({"proj_in": linear(d, m), "proj_out": linear(m, d)})

    def forward(self, x, cond):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.adaLN_modulation(F.silu(cond))[:, None].chunk(6, dim=-1)
        h = F.layer_norm(x, x.shape[-1:], eps=1e-6) * (1 + scale1) + shift1
        q, k, v = (self.attn[n](h).unflatten(-1, (self.heads, -1)).transpose(1, 2) for n in ("to_q", "to_k", "to_v"))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        x = x + gate1 * self.attn["to_out"](a)
        h = F.layer_norm(x, x.shape[-1:], eps=1e-6) * (1 + scale2) + shift2
        return x + gate2 * self.ff["proj_out"](F.gelu(self.ff["proj_in"](h), approximate="tanh"))


class TorchExampleDiT(torch.nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        d, c, p = cfg["hidden_dim"], cfg["in_channels"], cfg["patch_size"]
        self.cfg = cfg
        self.patch_embed = torch.nn.Conv2d(c, d, p, stride=p)
        self.time_embed = torch.nn.ModuleDict({"linear_1": linear(cfg["freq_dim"], d), "linear_2": linear(d, d)})
        self.text_proj = linear(cfg["text_dim"], d)
        self.blocks = torch.nn.ModuleList(
            TorchBlock(d, d * cfg["mlp_ratio"], cfg["num_heads"]) for _ in range(cfg["num_layers"]))
        self.norm_out = torch.nn.ModuleDict({"linear": linear(d, 2 * d)})
        self.proj_out = linear(d, c * p * p)

    def forward(self, latents, timestep, context):
        b, c, f, hh, ww = latents.shape
        p, d = self.cfg["patch_size"], self.cfg["hidden_dim"]
        h, w = hh // p, ww // p
        x = self.patch_embed(latents.transpose(1, 2).reshape(b * f, c, hh, ww))  # (B*F, d, h, w)
        x = x.reshape(b, f, d, h, w).permute(0, 1, 3, 4, 2).reshape(b, f * h * w, d)  # tokens in (f, h, w) order
        half = self.cfg["freq_dim"] // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=latents.dtype) / half)
        args = timestep[:, None] * freqs[None]
        t = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        cond = self.time_embed["linear_2"](F.silu(self.time_embed["linear_1"](t))) + self.text_proj(context).mean(1)
        for block in self.blocks:
            x = block(x, cond)
        shift, scale = self.norm_out["linear"](F.silu(cond))[:, None].chunk(2, dim=-1)
        y = self.proj_out(F.layer_norm(x, (d,), eps=1e-6) * (1 + scale) + shift)  # features (C, p, p)
        return y.reshape(b, f, h, w, c, p, p).permute(0, 4, 1, 2, 5, 3, 6).reshape(b, c, f, hh, ww)


def test_dit_matches_the_torch_reference(tmp_path):
    folder = str(tmp_path / "ckpt")
    write_tiny(folder, seed=7)
    ckpt = Checkpoint(folder)
    p = Plugins()
    plugin.register(p)
    spec = p.registry.get("example-tiny")
    run = resolve(p, ["model.id=example-tiny", f"model.checkpoint={folder}"])

    build = p.call("build_dit", spec, ckpt=ckpt, run=run)
    graphdef, state, flat = abstract_model(build.ctor)
    weights = load_file(f"{folder}/transformer/diffusion_pytorch_model.safetensors")  # numpy arrays

    def vidax(tensors, inputs):
        """The denoiser built from ``tensors`` (the checkpoint's, or them moved one ulp) on ``inputs``."""
        model = materialize(graphdef, state, p.call("convert_checkpoint", spec, component="transformer",
                                                    tensors=tensors, abstract=flat,
                                                    config=ckpt.config("transformer")))
        return np.asarray(model(*inputs))

    ref = TorchExampleDiT(ckpt.config("transformer"))
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)

    rng = np.random.default_rng(0)
    inputs = (rng.standard_normal((2, 4, 3, 8, 12)).astype(np.float32), np.array([999.0, 137.5], np.float32),
              rng.standard_normal((2, 6, 16)).astype(np.float32))  # latents, timestep, context

    got = vidax(weights, inputs)
    with torch.no_grad():
        ref32 = ref(*map(torch.from_numpy, inputs)).numpy()
        ref64 = ref.double()(*(torch.from_numpy(a.astype(np.float64)) for a in inputs)).numpy()
    assert_fp32_parity("example DiT vs torch float64", got, ref32, ref64,
                       vidax_err=fp32_error(vidax, weights, inputs, base=got))
