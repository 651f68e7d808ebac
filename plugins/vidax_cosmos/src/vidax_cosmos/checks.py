"""Cosmos-Predict2.5's run and checkpoint checks: one-line problems found before any weight loads."""

from __future__ import annotations

from vidax_core.run_checks import frame_count_problems, latent_channel_problems, size_problems


def run_problems(spec, run) -> list[str]:
    """Sizes, frame counts and the options of image- and video-to-world, before any weight loads."""
    s = run.sampling
    problems = []
    problems += frame_count_problems(s.num_frames, 4, "Cosmos-Predict2.5", "the VAE compresses time by 4")
    problems += size_problems(s, 16, f"{spec.id} (VAE factor 8 x patch 2)")
    if run.image is not None and run.video is not None:
        problems.append(f"{spec.id} conditions on an image OR a video: set only one of image: and video:")
    o = run.options
    n = o.get("num_latent_conditional_frames")
    if n is not None and int(n) not in (1, 2):
        problems.append(f"options.num_latent_conditional_frames must be 1 or 2, got {n}")
    elif run.video is not None:
        latent_frames = (s.num_frames - 1) // 4 + 1
        if int(n or 2) >= latent_frames:
            problems.append(f"video-to-world with num_latent_conditional_frames={int(n or 2)} needs more latent "
                            f"frames than that: sampling.num_frames={s.num_frames} gives {latent_frames}; use at "
                            f"least {4 * int(n or 2) + 1}")
    cft = o.get("conditional_frame_timestep")
    if cft is not None and not float(cft) <= 1.0:
        problems.append(f"options.conditional_frame_timestep must be at most 1 (a sigma; negative = none), got {cft}")
    if s.max_sequence_length < 16:
        problems.append(f"sampling.max_sequence_length={s.max_sequence_length} cannot hold the chat template: "
                        "use 512 (the pipeline's)")
    return problems


def grid_limit(cfg):
    """The token grid the Cosmos DiT's RoPE table covers: ``max(max_size / patch_size)`` positions along every
    axis (diffusers' ``CosmosRotaryPosEmbed`` builds one table of that length for all three)."""
    from vidax_core import GridLimit

    n = max(m // p for m, p in zip(cfg.max_size, cfg.patch_size))
    return GridLimit((n, n, n), f"max_size={list(cfg.max_size)} / patch_size={list(cfg.patch_size)} in "
                                f"transformer/config.json (the DiT's RoPE table)")


def checkpoint_problems(spec, ckpt, run, dit) -> list[str]:
    """The DiT config must be a Cosmos-Predict2.5 one and fit the VAE; read from config files only."""
    problems: list[str] = []
    where = "transformer/config.json"
    if ckpt.has("tokenizer"):
        from .text import check_template

        problems += check_template(ckpt.path("tokenizer"))
    if dit.extra_pos_embed_type is not None:
        problems.append(f"{where}: extra_pos_embed_type={dit.extra_pos_embed_type!r} is a Cosmos-1.0 model; "
                        f"{spec.id} needs null")
    if dit.img_context_dim_in or dit.controlnet_block_every_n:
        problems.append(f"{where}: image context / ControlNet inputs (Cosmos-Transfer2.5) are not supported by "
                        f"{spec.id}")
    if dit.in_channels != dit.out_channels + 1:
        problems.append(f"{where}: in_channels={dit.in_channels} must be out_channels + 1 (the condition mask) "
                        f"for Cosmos-Predict2.5, out_channels is {dit.out_channels}")
    if dit.patch_size[0] != 1:
        problems.append(f"{where}: patch_size[0]={dit.patch_size[0]}: per-frame timesteps need 1")
    problems += latent_channel_problems(ckpt, dit.out_channels, where=where)
    if ckpt.has("text_encoder") and dit.use_crossattn_projection:
        te = ckpt.config("text_encoder")
        tc = te.get("text_config") if isinstance(te.get("text_config"), dict) else te
        try:
            width = int(tc["hidden_size"]) * int(tc["num_hidden_layers"])
        except (KeyError, TypeError, ValueError):
            width = None
        if width is not None and width != dit.crossattn_proj_in_channels:
            problems.append(f"{where}: crossattn_proj_in_channels={dit.crossattn_proj_in_channels} must equal the "
                            f"text encoder's hidden_size x num_hidden_layers = {width} (text_encoder/config.json)")
    return problems
