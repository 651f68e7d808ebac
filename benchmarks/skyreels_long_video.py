"""The accelerator figure of docs/models/skyreels.md: a 20-second 540P video of SkyReels-V2-DF-1.3B, window by
window, with the time of each window. No download, no torch: the checkpoint is written here with RANDOM weights
(numpy, saved in bf16) at the real shapes (benchmarks/skyreels_shapes.json: the DF-1.3B transformer and the
Wan2.1 VAE as diffusers names them), then `vidax run` makes the video with the reference's long-video recipe.

  python benchmarks/skyreels_long_video.py OUT [--seconds 20] [--steps 30] [--checkpoint DIR] [--only-checkpoint]
  python benchmarks/skyreels_long_video.py OUT --tiny          (CPU check at tiny size)

The text encoder is not the 5.7B UMT5-XXL: one UMT5 layer with the real output width (4096) and the tiny tokenizer
of vidax-skyreels' built-in checkpoint (the prompt is encoded once; it is not part of a window's time). The video:
544x960, 24 fps, `seconds * 24` frames rounded up to 4k+1 (481 for 20 s: six windows of 97 frames overlapping by
17, the last shorter), 30 steps by default, guidance 6, addnoise_condition 20. Printed: one line per window
(latent frames, steps, sampling s, decode s, window s), per-step s, compile s, total s, the peak device memory, and,
when --steps is below the recipe's 30, each full window's time at 30 steps projected from the measured per-step
time (labelled as a projection). Written: OUT/video.mp4, OUT/metrics.json, OUT/windows.md.
--checkpoint DIR (default OUT/checkpoint) is reused when it holds a checkpoint; --only-checkpoint writes it and
stops (on a machine whose command time is limited: write it once into a kept folder, then run the video).
--tiny: the same script end to end on CPU at tiny size (the built-in tiny checkpoint's shapes, 64x64).
--write-shapes: regenerate benchmarks/skyreels_shapes.json (needs torch + diffusers + transformers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = os.path.join(HERE, "skyreels_shapes.json")
MODEL = "skyreels-v2-df-1.3b-540p"
RECIPE_STEPS = 30
TEXT_ENCODER = dict(d_model=4096, d_kv=64, d_ff=256, num_layers=1, num_heads=8, relative_attention_num_buckets=32,
                    relative_attention_max_distance=128, feed_forward_proj="gated-gelu")


def write_shapes() -> None:
    """{component: {"config": config.json, "shapes": {key: shape}}} of the real DF-1.3B transformer and Wan2.1 VAE
    (diffusers on the meta device) and the one-layer text encoder."""
    sys.path.insert(0, os.path.join(HERE, "..", "plugins", "vidax_skyreels", "tests"))
    import torch
    from diffusers import AutoencoderKLWan, SkyReelsV2Transformer3DModel
    from test_skyreels_full_size import DITS
    from transformers import UMT5Config, UMT5EncoderModel

    from vidax_core.testing.config_folders import diffusers_config
    from vidax_core.testing.published import WAN21_VAE

    out = {}
    with torch.device("meta"):
        for name, module, cls in (("transformer", SkyReelsV2Transformer3DModel(**DITS[MODEL]),
                                   "SkyReelsV2Transformer3DModel"),
                                  ("vae", AutoencoderKLWan(**WAN21_VAE), "AutoencoderKLWan")):
            out[name] = {"config": diffusers_config(module, cls),
                         "shapes": {k: list(v.shape) for k, v in module.state_dict().items()}}
        text = UMT5EncoderModel(UMT5Config(vocab_size=1, **TEXT_ENCODER))
        out["text_encoder"] = {"config": None, "shapes": {k: list(v.shape) for k, v in text.state_dict().items()
                                                          if not k.endswith("embed_tokens.weight")}}
    with open(SHAPES, "w") as f:
        json.dump(out, f, indent=0)
    print("wrote", SHAPES)


def _tiny_folder() -> str:
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    return plugins.call("builtin_checkpoint", plugins.registry.get(MODEL), name="tiny-random")


def _spec(tiny: bool) -> dict:
    """The components to write: the committed real shapes, or (``tiny``) the built-in tiny checkpoint's own."""
    if not tiny:
        with open(SHAPES) as f:
            return json.load(f)
    from vidax_core.io.safetensors import SafetensorsFile

    src, out = _tiny_folder(), {}
    for name in ("transformer", "vae", "text_encoder"):
        folder = os.path.join(src, name)
        weights = next(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        out[name] = {"config": config, "shapes": {k: list(SafetensorsFile(weights).shape(k))
                                                   for k in SafetensorsFile(weights)}}
    return out


def write_checkpoint(folder: str, tiny: bool) -> None:
    """A diffusers-layout checkpoint with random weights (N(0, 1/fan_in), 1-D N(0, 0.02^2), vidax_core.io.builtin's
    rule), drawn tensor by tensor and saved in bf16 (float32 for the tiny CPU run)."""
    import ml_dtypes
    import numpy as np

    from vidax_core.io.builtin import random_weights, weight_file, write_json
    from vidax_core.io.safetensors import save_file

    spec, tiny_src = _spec(tiny), _tiny_folder()
    rng = np.random.default_rng(0)
    os.makedirs(folder, exist_ok=True)
    shutil.copytree(os.path.join(tiny_src, "tokenizer"), os.path.join(folder, "tokenizer"), dirs_exist_ok=True)
    with open(os.path.join(tiny_src, "text_encoder", "config.json")) as f:
        text_config = json.load(f)
    if spec["text_encoder"]["config"] is None:  # the real width, the tiny tokenizer's vocabulary
        spec["text_encoder"]["config"] = {**text_config, **TEXT_ENCODER}
        vocab = (text_config["vocab_size"], TEXT_ENCODER["d_model"])
        spec["text_encoder"]["shapes"]["shared.weight"] = list(vocab)
    dtype = np.float32 if tiny else ml_dtypes.bfloat16
    index = {"_class_name": "SkyReelsV2DiffusionForcingPipeline"}
    for name, part in spec.items():
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        write_json(os.path.join(folder, name, "config.json"), part["config"])
        tensors = {k: random_weights({k: tuple(s)}, rng)[k].astype(dtype) for k, s in sorted(part["shapes"].items())}
        save_file(tensors, os.path.join(folder, name, weight_file(name)))
        del tensors
        library = "transformers" if name == "text_encoder" else "diffusers"
        index[name] = [library, part["config"]["_class_name"] if name != "text_encoder" else "UMT5EncoderModel"]
    index["tokenizer"] = ["transformers", "T5TokenizerFast"]
    os.makedirs(os.path.join(folder, "scheduler"), exist_ok=True)
    write_json(os.path.join(folder, "scheduler", "scheduler_config.json"),
               {"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "solver_order": 2,
                "prediction_type": "flow_prediction", "use_flow_sigmas": True, "flow_shift": 8.0})
    index["scheduler"] = ["diffusers", "UniPCMultistepScheduler"]
    write_json(os.path.join(folder, "model_index.json"), index)


def frames_for(seconds: float, fps: int = 24) -> int:
    n = max(int(math.ceil(seconds * fps)), 1)
    return (n - 1 + 3) // 4 * 4 + 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--steps", type=int, default=RECIPE_STEPS)
    p.add_argument("--tiny", action="store_true", help="CPU check at tiny size")
    p.add_argument("--checkpoint", help="where the random checkpoint is written / reused (default OUT/checkpoint)")
    p.add_argument("--only-checkpoint", action="store_true", help="write the checkpoint and stop")
    p.add_argument("--write-shapes", action="store_true")
    a = p.parse_args()
    if a.write_shapes:
        write_shapes()
        return 0
    if not a.out:
        p.error("OUT is required")
    os.makedirs(a.out, exist_ok=True)
    ckpt = a.checkpoint or os.path.join(a.out, "checkpoint")
    t0 = time.perf_counter()
    if not os.path.exists(os.path.join(ckpt, "model_index.json")):
        write_checkpoint(ckpt, a.tiny)
    print(f"random checkpoint: {ckpt} ({time.perf_counter() - t0:.1f} s)", flush=True)
    if a.only_checkpoint:
        return 0

    from vidax_core import cli

    size = ["sampling.height=64", "sampling.width=64", "sampling.max_sequence_length=16",
            "options.base_num_frames=17", "options.overlap_history=5"] if a.tiny else \
        ["sampling.height=544", "sampling.width=960", "options.base_num_frames=97", "options.overlap_history=17"]
    frames = frames_for(a.seconds)
    metrics_path = os.path.join(a.out, "metrics.json")
    code = cli.main(["run", f"model.id={MODEL}", f"model.checkpoint={ckpt}", "prompt=A graceful white swan swims in "
                     "a serene lake at dawn", f"sampling.num_steps={a.steps}", "sampling.guidance_scale=6.0",
                     f"sampling.num_frames={frames}", "options.addnoise_condition=20", "output.fps=24",
                     f"output.path={os.path.join(a.out, 'video.mp4')}", f"output.metrics={metrics_path}",
                     "output.overwrite=true", *size, "--quiet"])
    if code:
        return code
    with open(metrics_path) as f:
        m = json.load(f)
    lines = [f"SkyReels-V2-DF-1.3B, random weights, {frames} frames ({frames / 24:.2f} s at 24 fps), "
             f"{m['passes'][0]['height']}x{m['passes'][0]['width']}, {a.steps} steps per window, "
             f"backend {m['backend']}, {m['parallel']['devices']} device(s), attention {m['attention_backend']}", "",
             "| window | latent frames | steps | sampling s | decode s | window s |"
             + (f" window s at {RECIPE_STEPS} steps (projected) |" if a.steps < RECIPE_STEPS else ""),
             "|---|---|---|---|---|---|" + ("---|" if a.steps < RECIPE_STEPS else "")]
    per_step = m["per_step_s"]
    for w in m["windows"]:
        row = (f"| {w['window'] + 1} | {w['latent_frames']} | {w['steps']} | {w['sampling_s']:.2f} | "
               f"{w['decode_s']:.2f} | {w['total_s']:.2f} |")
        if a.steps < RECIPE_STEPS:
            row += f" {w['total_s'] + (RECIPE_STEPS - w['steps']) * per_step:.1f} |"
        lines.append(row)
    lines += ["", f"per step {per_step:.3f} s (median of the steady steps), compile {m['compile_s']:.1f} s, "
              f"per window {m['per_window_s']:.1f} s (median after the first), total {m['total_s']:.1f} s, "
              f"peak device memory {m['device_peak_bytes'] / 2**30:.2f} GiB ({m['device_peak_source']}), "
              f"MFU {m.get('mfu')}"]
    text = "\n".join(lines)
    with open(os.path.join(a.out, "windows.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
