"""The accelerator figures of docs/models/anyflow.md, on one chip (a TPU v5e): AnyFlow-FAR 1.3B at 480x832 made chunk
by chunk (real time: frames per second of wall time after the first chunk, the first frames' latency after the
encoded prompt, a 60-second video's time per chunk) and AnyFlow 14B (bidirectional) at 480p end to end with its
blocks streamed from the host. No download, no torch: the checkpoints are written with RANDOM weights at the real
shapes by the torch-free writer (vidax_core.bench.random_checkpoint, the published layouts shipped in vidax-anyflow;
the text encoder is one UMT5 layer of the real width, so prompt encoding is not the real one's and is not timed).

  python benchmarks/anyflow_far_tpu.py OUT [--steps 4] [--seconds 60] [--checkpoints DIR] [--skip-14b] [--tiny]

1. ``far_81``: the model card's 81 frames (chunks 1 + 3 x 6 + 2), made once to compile every chunk's programs and
   cache the prompt, then streamed again (``pipe.stream``): ``first_frames_s`` from the call's start (the prompt's
   embedding cached: what follows the encoded prompt) to the first chunk's frames, ``fps_after_first`` the frames
   after the first chunk over the wall time they took, each chunk's arrival time.
2. ``far_long``: a ``--seconds`` video at 16 fps (961 frames for 60 s: chunks 1 + 3 x 80; the compressed past a
   ring of the trained 21 latent frames), each chunk's steps, cache write and decode (the run's metrics), chunk 1
   against chunk 20 and the last, ``fps_after_first``.
3. ``anyflow_14b_offload``: AnyFlow-Wan2.1-T2V-14B at 480x832, 81 frames, 4 steps, ``offload.enabled=true``
   ``offload.storage=disk`` (26 GiB of blocks streamed from the page cache: the v5e host's 40 GiB holds no pinned
   copy beside the runtime's own), the run's metrics.

Written: OUT/anyflow_far_tpu.json (every figure above) and OUT/*.mp4. ``--tiny``: the same script on CPU with the
built-in tiny checkpoints at 64x64 (a check of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

FAR, BI = "anyflow-far-wan2.1-1.3b", "anyflow-wan2.1-t2v-14b"
PROMPT = "A red panda eating bamboo in a forest, cinematic lighting"


def checkpoint(model: str, folder: str, tiny: bool) -> str:
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    if tiny:
        return plugins.call("builtin_checkpoint", plugins.registry.get(model), name="tiny-random")
    path = os.path.join(folder, model)
    if not os.path.exists(os.path.join(path, "model_index.json")):
        from vidax_core.bench.random_checkpoint import write_random_checkpoint

        write_random_checkpoint(model, path, plugins=plugins)
    return path


def timed_stream(pipe, **kwargs) -> dict:
    """One streamed call: each chunk's arrival (s from the call's start) and frames."""
    t0 = time.perf_counter()
    arrivals, frames = [], []
    stream = pipe.stream(**kwargs)
    for chunk in stream:
        arrivals.append(time.perf_counter() - t0)
        frames.append(int(chunk.shape[1]))
    after = sum(frames[1:])
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {"first_frames_s": arrivals[0], "arrivals_s": arrivals, "frames_per_chunk": frames,
            "total_s": time.perf_counter() - t0, "fps_after_first": after / span if span else None,
            "metrics": stream.output.metrics}


def chunk_rows(metrics: dict) -> dict:
    rows = metrics["windows"]
    totals = [r["total_s"] for r in rows]
    out = {"chunks": [{k: r.get(k) for k in ("window", "latent_frames", "frames", "sampling_s", "cache_fill_s",
                                             "decode_s", "total_s")} for r in rows]}
    if len(totals) > 20:
        out.update(chunk_1_s=totals[1], chunk_20_s=totals[20], last_s=totals[-1], ratio_20_to_1=totals[20] / totals[1],
                   ratio_last_to_1=totals[-1] / totals[1])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="out/anyflow_far_tpu")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--checkpoints", default=None, help="where the random checkpoints are written / reused")
    p.add_argument("--skip-14b", action="store_true")
    p.add_argument("--tiny", action="store_true", help="the script on CPU with the tiny built-ins at 64x64")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import jax

    import vidax

    folder = a.checkpoints or os.path.join(a.out, "checkpoints")
    size = ["sampling.height=64", "sampling.width=64", "sampling.max_sequence_length=16"] if a.tiny else \
        ["sampling.height=480", "sampling.width=832"]
    report = {"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()], "steps": a.steps,
              "tiny": a.tiny, "cases": {}}

    def save() -> None:
        with open(os.path.join(a.out, "anyflow_far_tpu.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)

    t0 = time.perf_counter()
    pipe = vidax.load(FAR, f"model.checkpoint={checkpoint(FAR, folder, a.tiny)}", f"prompt={PROMPT}", *size,
                      f"sampling.num_steps={a.steps}", "sampling.num_frames=81")
    report["far_load_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    pipe()  # compiles every chunk shape of the 81-frame video, caches the prompt
    report["far_first_video_s"] = time.perf_counter() - t1
    case = timed_stream(pipe, output={"path": os.path.join(a.out, "far_81.mp4")})
    case.update(chunk_rows(case.pop("metrics")))
    report["cases"]["far_81"] = case
    print(f"far_81: first frames {case['first_frames_s']:.2f} s after the call (prompt cached), "
          f"{case['fps_after_first']:.1f} frames/s after the first chunk", flush=True)
    save()
    frames = int(round(a.seconds * 16 / 4)) * 4 + 1
    t1 = time.perf_counter()
    long = timed_stream(pipe, num_frames=frames, output={"path": os.path.join(a.out, "far_long.mp4")})
    long.update(chunk_rows(long.pop("metrics")), num_frames=frames, wall_s=time.perf_counter() - t1)
    report["cases"]["far_long"] = long
    print(f"far_long: {frames} frames in {long['wall_s']:.1f} s, {long['fps_after_first']:.1f} frames/s after the "
          f"first chunk; chunk 1 {long.get('chunk_1_s', float('nan')):.2f} s, chunk 20 "
          f"{long.get('chunk_20_s', float('nan')):.2f} s, last {long.get('last_s', float('nan')):.2f} s", flush=True)
    pipe.close()
    save()
    if not a.skip_14b:
        from vidax_core import cli

        ckpt = checkpoint(BI, folder, a.tiny)
        metrics = os.path.join(a.out, "anyflow_14b_offload_metrics.json")
        rc = cli.main(["run", f"model.id={BI}", f"model.checkpoint={ckpt}", f"prompt={PROMPT}", *size,
                       f"sampling.num_steps={a.steps}", "sampling.num_frames=81", "offload.enabled=true",
                       "offload.storage=disk", f"output.path={os.path.join(a.out, 'anyflow_14b_offload.mp4')}",
                       f"output.metrics={metrics}", "output.overwrite=true"])
        report["cases"]["anyflow_14b_offload"] = {"exit": rc, "metrics": json.load(open(metrics))
                                                  if os.path.exists(metrics) else None}
        save()
    print(f"wrote {os.path.join(a.out, 'anyflow_far_tpu.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
