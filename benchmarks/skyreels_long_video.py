"""The accelerator figure of docs/models/skyreels.md: a 20-second 540P video of SkyReels-V2-DF-1.3B, window by
window, with the time of each window. No download, no torch: the checkpoint is written here with RANDOM weights at
the real shapes by the torch-free writer (`vidax bench --write-random-checkpoint skyreels-v2-df-1.3b-540p DIR`,
vidax_core.bench.random_checkpoint: the published layout shipped in vidax-skyreels' assets/published, the
transformer in bf16, the Wan2.1 VAE in float32), then `vidax run` makes the video with the reference's long-video
recipe.

  python benchmarks/skyreels_long_video.py OUT [--seconds 20] [--steps 30] [--checkpoint DIR] [--only-checkpoint]
  python benchmarks/skyreels_long_video.py OUT --tiny          (CPU check at tiny size)

The text encoder is not the 5.7B UMT5-XXL: the writer keeps one UMT5 layer with the real output width (4096) and
the tiny tokenizer of vidax-skyreels' built-in checkpoint (the prompt is encoded once; it is not part of a window's
time). The video: 544x960, 24 fps, `seconds * 24` frames rounded up to 4k+1 (481 for 20 s: six windows of 97
frames overlapping by 17, the last shorter), 30 steps by default, guidance 6, addnoise_condition 20, the VAE
tiled (untiled, a window's decode did not fit beside the resident denoiser on a 16 GB TPU v5e). Printed: one
line per window (latent frames, steps, sampling s, decode s, window s), per-step s, compile s, total s, the peak
device memory, and, when --steps is below the recipe's 30, each full window's time at 30 steps projected from the
measured per-step time (labelled as a projection). Written: OUT/video.mp4 (not with --no-video, or where
imageio-ffmpeg is missing: every window is still decoded), OUT/metrics.json, OUT/windows.md.
--checkpoint DIR (default OUT/checkpoint) is reused when it holds a checkpoint; --only-checkpoint writes it and
stops. --tiny: the same script end to end on CPU at tiny size (the built-in tiny checkpoint, 64x64).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

MODEL = "skyreels-v2-df-1.3b-540p"
RECIPE_STEPS = 30


def checkpoint(folder: str, tiny: bool) -> str:
    """The checkpoint to run: the built-in tiny one, or ``folder`` (written there with random weights unless it
    already holds a checkpoint)."""
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    if tiny:
        return plugins.call("builtin_checkpoint", plugins.registry.get(MODEL), name="tiny-random")
    if not os.path.exists(os.path.join(folder, "model_index.json")):
        from vidax_core.bench.random_checkpoint import write_random_checkpoint

        write_random_checkpoint(MODEL, folder, plugins=plugins)
    return folder


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
    p.add_argument("--no-video", action="store_true",
                   help="decode every window but write no mp4 (the default where imageio-ffmpeg is missing)")
    a = p.parse_args()
    if not a.out:
        p.error("OUT is required")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.perf_counter()
    ckpt = checkpoint(a.checkpoint or os.path.join(a.out, "checkpoint"), a.tiny)
    print(f"checkpoint: {ckpt} ({time.perf_counter() - t0:.1f} s)", flush=True)
    if a.only_checkpoint:
        return 0

    from vidax_core import cli

    size = ["sampling.height=64", "sampling.width=64", "sampling.max_sequence_length=16",
            "options.base_num_frames=17", "options.overlap_history=5"] if a.tiny else \
        ["sampling.height=544", "sampling.width=960", "options.base_num_frames=97", "options.overlap_history=17",
         "vae.tiling=true"]  # untiled, a window's decode program did not fit beside the denoiser on a TPU v5e
    frames = frames_for(a.seconds)
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        a.no_video = True
        print("imageio-ffmpeg is not installed: every window is decoded, no mp4 is written", flush=True)
    video = "output.path=null" if a.no_video else f"output.path={os.path.join(a.out, 'video.mp4')}"
    metrics_path = os.path.join(a.out, "metrics.json")
    code = cli.main(["run", f"model.id={MODEL}", f"model.checkpoint={ckpt}", "prompt=A graceful white swan swims in "
                     "a serene lake at dawn", f"sampling.num_steps={a.steps}", "sampling.guidance_scale=6.0",
                     f"sampling.num_frames={frames}", "options.addnoise_condition=20", "output.fps=24",
                     video, f"output.metrics={metrics_path}",
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
