"""The built-in ``tiny`` checkpoint: seeded random weights in diffusers layout, generated on first use.

Nothing is downloaded: :func:`vidax_core.generated_checkpoint` writes the folder into the user's cache
(``$XDG_CACHE_HOME/vidax/vidax-example-plugin/<version>/tiny``) atomically, so concurrent first runs are safe and
a new release of the plugin gets a fresh one.
"""

from __future__ import annotations

from vidax_core import generated_checkpoint, write_diffusers

from . import __version__, dit, text, vae

TINY = {
    "transformer": {"_class_name": "ExampleDiT", "in_channels": 4, "patch_size": 2, "hidden_dim": 32, "num_heads": 4,
                    "num_layers": 2, "mlp_ratio": 2, "text_dim": 16, "freq_dim": 32},
    "text_encoder": {"_class_name": "ByteTextEncoder", "vocab_size": 257, "hidden_size": 16},
    "vae": {"_class_name": "UpsampleVAE", "latent_channels": 4, "out_channels": 3, "scale_factor": 2},
}
SCHEDULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0}


def write_tiny(folder: str, seed: int = 0, **transformer: int) -> None:
    """Write a tiny checkpoint (random weights, the real key names) into ``folder``; ``transformer`` overrides
    entries of its transformer/config.json (tests use other sizes)."""
    configs = {**TINY, "transformer": {**TINY["transformer"], **transformer}}
    shapes = {
        "transformer": dit.checkpoint_shapes(dit.ExampleDiTConfig.from_config(configs["transformer"])),
        "text_encoder": text.checkpoint_shapes(configs["text_encoder"]),
        "vae": vae.checkpoint_shapes(configs["vae"]),
    }
    write_diffusers(folder, {c: (configs[c], shapes[c]) for c in configs}, pipeline="ExamplePipeline",
                    library="vidax_example_plugin", scheduler=SCHEDULER, seed=seed)


def builtin_folder(name: str) -> str | None:
    """The folder of built-in checkpoint ``name``, generated on first use; None if there is no such checkpoint."""
    if name != "tiny":
        return None
    return generated_checkpoint("vidax-example-plugin", __version__, name, write_tiny)
