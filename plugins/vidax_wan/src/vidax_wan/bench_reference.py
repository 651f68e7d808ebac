"""The Wan family's side of ``vidax bench``: the diffusers reference runs (hooks ``bench_reference`` and ``bench_dit``).

torch and diffusers are optional, test-only dependencies of vidax: they are imported here lazily, only when a
benchmark asks for the reference, and their absence is a one-line :class:`~vidax_core.errors.UserError`.

``WanDiffusersReference`` (a :class:`vidax_core.bench.torch_reference.DiffusersReference`) times ``WanPipeline``
phase by phase: ``from_pretrained`` + move; ``encode_prompt`` for prompt and negative prompt; the denoising call
with ``output_type="latent"``; the pipeline's own decode: de-normalise, ``vae.decode``, ``postprocess_video``.

``WanDitBench`` gives ``vidax bench --dit-only`` a Wan2.1-1.3B-width DiT in vidax and in diffusers with the same
random weights, and the Wan2.1 VAE decoder for the compile-time-vs-frames part.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from vidax_core.errors import UserError

from vidax_core.bench.torch_reference import DiffusersReference, decode_wan_latents
from vidax_core.bench.torch_reference import torch_diffusers as _imports


def reference_scheduler(pipe, choice: Any):
    """The diffusers scheduler matching ``sampling.scheduler`` (None keeps the checkpoint's own)."""
    if choice is None:
        return pipe.scheduler
    from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

    if isinstance(choice, str):
        name, opts = choice, {}
    else:
        opts = dict(choice)
        name = opts.pop("name", None)
    shift = opts.get("flow_shift", opts.get("shift"))
    if name == "unipc":
        kw = {"flow_shift": shift} if shift is not None else {}
        return UniPCMultistepScheduler.from_config(pipe.scheduler.config, **kw)
    if name in ("flow_euler", "euler"):
        kw = {"shift": shift} if shift is not None else {}
        return FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config, **kw)
    raise UserError(f"--reference diffusers: no diffusers scheduler mapped for sampling.scheduler={name!r}; "
                    "leave sampling.scheduler unset to use the checkpoint's scheduler")


class WanDiffusersReference(DiffusersReference):
    """Executes the run config with diffusers' ``WanPipeline`` from ``ckpt_dir`` (on ``device``, default CUDA when
    there is one) and returns its metrics; ``sampling.scheduler`` picks the matching diffusers scheduler."""

    family = "Wan"

    def configure(self, pipe: Any) -> None:
        pipe.scheduler = reference_scheduler(pipe, self.run.sampling.scheduler)

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(diffusers.WanPipeline)  # only the DiT in model.dtype, as vidax runs it

        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            prompt_embeds, negative_embeds = pipe.encode_prompt(
                prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length, device=device,
            )
        kwargs = dict(
            prompt_embeds=prompt_embeds.to(dtype),
            negative_prompt_embeds=None if negative_embeds is None else negative_embeds.to(dtype),
            height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
            guidance_scale=s.guidance_scale, generator=self.generator(),
            output_type="latent", callback_on_step_end=clock.on_step_end, max_sequence_length=s.max_sequence_length,
        )
        if s.guidance_scale_2 is not None:
            kwargs["guidance_scale_2"] = s.guidance_scale_2
        with clock.sampling():
            latents = pipe(**kwargs).frames

        with clock.phase("decode"):
            frames = decode_wan_latents(pipe, latents)
        return self.metrics(latents, frames, scheduler=type(pipe.scheduler).__name__)


# --------------------------------------------------------------------------------------------------------------
# vidax bench --dit-only

# The default architecture when no checkpoint is given: Wan2.1-T2V-1.3B's published transformer config.
WAN13B = dict(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16, out_channels=16,
    text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024,
)
ARCH_KEYS = tuple(WAN13B) + ("image_dim", "added_kv_proj_dim", "pos_embed_seq_len")


class WanDitBench:
    """The model parts of ``vidax bench --dit-only`` (see :mod:`vidax_core.bench.dit`) at the architecture of
    ``config`` (a ``WanTransformer3DModel`` config dict: any published width), default Wan2.1-1.3B's.

    One guided step at 17 frames x 256 x 256 (latent C x 5 x 32 x 32 -> 1280 video tokens), text 512 x text_dim;
    the reference step is ``WanPipeline``'s (two batch-1 transformer calls, guidance, UniPC ``scheduler.step``)
    or one batch-2 transformer call.
    """

    video_tokens = 5 * 16 * 16
    flow_shift = 3.0

    def __init__(self, need_reference: bool, config: dict | None = None) -> None:
        if need_reference:
            _imports()
        self.arch = dict(WAN13B) if config is None else {k: config[k] for k in ARCH_KEYS if k in config}
        self.arch["patch_size"] = tuple(self.arch.get("patch_size", (1, 2, 2)))
        width = self.arch["num_attention_heads"] * self.arch["attention_head_dim"]
        self.label = "Wan2.1-1.3B width" if config is None else f"Wan width {width}"
        self.latent_shape = (int(self.arch["in_channels"]), 5, 32, 32)
        self.context_shape = (512, int(self.arch["text_dim"]))

    def abstract_dit(self, blocks: int) -> Callable[[], Any]:
        """A constructor of the vidax DiT with ``blocks`` blocks (called under ``nnx.eval_shape``)."""
        from flax import nnx

        from vidax_core.wan_dit.model import WanDiT, WanDiTConfig

        cfg = WanDiTConfig.from_config({**self.arch, "num_layers": blocks})
        return lambda: WanDiT(cfg, rngs=nnx.Rngs(0))

    def paired_dits(self, blocks: int, seed: int = 0) -> tuple[Any, Any, int]:
        """(vidax DiT, diffusers transformer, parameter count) with the same random fp32 weights."""
        torch, diffusers = _imports()
        from vidax_core.wan_dit.keys import load_dit
        from vidax_core.wan_dit.model import WanDiTConfig

        torch.manual_seed(seed)
        ref = diffusers.WanTransformer3DModel(**{**self.arch, "num_layers": blocks}).eval().float()
        tensors = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
        model = load_dit(WanDiTConfig.from_config({**self.arch, "num_layers": blocks}), tensors)
        return model, ref, int(sum(v.size for v in tensors.values()))

    def reference_steps(self, ref: Any, latents: np.ndarray, context: np.ndarray, guidance: float,
                        num_steps: int) -> tuple[dict[str, Callable[[], None]], Callable[[], np.ndarray], dict]:
        """Zero-argument callables that each run (and synchronise) one reference denoising step, a function
        returning the pipeline-step engine's current latents, and facts about the reference (device, threads)."""
        torch, diffusers = _imports()
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        ref.to(dev)

        def sync():
            if dev == "cuda":
                torch.cuda.synchronize()

        def make(batch2: bool):
            sched = diffusers.UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                                      num_train_timesteps=1000, flow_shift=self.flow_shift)
            sched.set_timesteps(num_steps, device=dev)
            c = torch.from_numpy(context.copy()).to(dev)
            st = {"x": torch.from_numpy(latents.copy()).to(dev), "i": 0}

            @torch.no_grad()
            def run() -> None:
                xt, t = st["x"], sched.timesteps[st["i"]]
                if batch2:
                    out = ref(hidden_states=torch.cat([xt, xt]), timestep=t.expand(2), encoder_hidden_states=c,
                              return_dict=False)[0]
                    cond, unc = out[:1], out[1:]
                else:
                    cond = ref(hidden_states=xt, timestep=t.expand(1),
                               encoder_hidden_states=c[:1], return_dict=False)[0]
                    unc = ref(hidden_states=xt, timestep=t.expand(1), encoder_hidden_states=c[1:], return_dict=False)[0]
                st["x"] = sched.step(unc + guidance * (cond - unc), t, xt, return_dict=False)[0]
                sync()
                st["i"] += 1

            return run, st

        pipe_step, pipe_state = make(batch2=False)
        b2_step, _ = make(batch2=True)
        facts = {
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "torch_device": dev,
            "torch_cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32) if dev == "cuda" else None,
        }

        def peak() -> int | None:
            return int(torch.cuda.max_memory_allocated()) if dev == "cuda" else None

        facts["device_peak_bytes"] = peak
        return ({"diffusers_pipeline": pipe_step, "diffusers_batch2": b2_step},
                lambda: pipe_state["x"].float().cpu().numpy(), facts)

    def vae_decoder(self) -> tuple[Callable[[np.ndarray], Any], Callable[[int, int], tuple], Callable[[], dict]]:
        """(decode(latents) -> frames, latent_shape(frames, size) -> (B, C, F, H, W), trace_counts() -> dict) of
        the Wan2.1 VAE with zero weights: the same programs and the same compile work as real weights."""
        from vidax_core.vae import wan21 as vae_mod

        cfg = vae_mod.WanVAEConfig()
        vae = vae_mod.WanVAE(cfg, with_encoder=False)

        def shape(frames: int, size: int) -> tuple:
            return (1, cfg.z_dim, (frames - 1) // 4 + 1, size // 8, size // 8)

        return (lambda z: vae_mod.decode_video(vae, z)), shape, (lambda: dict(vae_mod.TRACE_COUNTS))
