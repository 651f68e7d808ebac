"""Every family's DiT at its reference size, a few blocks of it, on this machine: one table.

  python benchmarks/random_dit_all.py OUT_DIR [--models ID,ID,...] [--blocks 1] [--repeats 1] [--attention auto]
                                      [--budget 570] [--timeout 150] [--set key=value ...]
  python benchmarks/random_dit_all.py OUT_DIR --demos [--set key=value ...]      (the tiny demo configs, on CPU)

For each model id (default: one per denoiser architecture, MODELS) its default config (configs/, the size the
family is published for) runs ``vidax bench --random-dit --published`` in a process of its own under a timeout:
the architecture from the id's published layout that ships with its plugin (nothing downloaded, no torch), random
weights drawn on the device, ``--blocks`` blocks of every stacked group, batch 2 (one CFG step). Per model: the
latent grid and tokens, compile time, call time, FLOPs of the call, TFLOP/s, MFU and the device's peak bytes.
``--demos`` runs the families' tiny demo configs (their built-in random checkpoints) in this process instead: the
CPU check of benchmarks/accelerator.sh. Writes OUT_DIR/random_dit_all.json and .md (one row per model, each
model's own report under OUT_DIR/random_dit/); exits 1 when a model failed or ran out of time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# One id per denoiser architecture, at its default config: Wan2.1 14B (720p) and Wan2.2 TI2V-5B, Cosmos-Predict2.5
# and Cosmos3, CogVideoX 1.0 and 1.5, HunyuanVideo and 1.5, Kandinsky 5 Lite and Pro (sparse attention), LTX-Video
# 13B (multi-scale: the second, larger pass), LTX-2.5 (video + audio), Motif-Video 2B, SANA-Video 2B (linear
# attention) and Kandinsky 6 Pro (video + audio).
MODELS = ("wan2.1-t2v-14b", "wan2.2-ti2v-5b", "cosmos-predict2.5-2b", "cosmos3-nano", "cogvideox-5b",
          "cogvideox1.5-5b", "hunyuanvideo-t2v-13b", "hunyuanvideo-1.5-t2v-720p", "kandinsky5-t2v-lite",
          "kandinsky5-t2v-pro", "ltx-video-13b-0.9.8-dev", "ltx-2.5-22b-dev", "motif-video-2b",
          "sana-video-2b-480p", "kandinsky6-ti2va-pro")
DEMOS = ("demo.yaml", "cosmos_demo.yaml", "cosmos3_demo.yaml", "cogvideox_demo.yaml", "hunyuan_demo.yaml",
         "hunyuan15_demo.yaml", "kandinsky_demo.yaml", "ltx_demo.yaml", "ltx2_demo.yaml", "motif_demo.yaml",
         "sana_video_demo.yaml", "kandinsky6_demo.yaml")


def _bench_args(a: argparse.Namespace) -> list[str]:
    return ["--random-dit", "--random-blocks", str(a.blocks), "--repeats", str(a.repeats), "--attention",
            a.attention, "--quiet"]


def _subprocess(model_id: str, config: str, a: argparse.Namespace, out: str, timeout: float) -> tuple[int, str]:
    """(exit code, last lines of its output) of one model's ``vidax bench --random-dit --published`` (124: timeout)."""
    cmd = [sys.executable, "-m", "vidax_core.cli", "bench", config, *a.set, "--published", *_bench_args(a),
           "--out", out, "--name", model_id]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"
    return proc.returncode, (proc.stdout + proc.stderr)[-600:]


def _in_process(config: str, a: argparse.Namespace, out: str, name: str) -> tuple[int, str]:
    from vidax_core.cli import main as cli

    try:
        return cli(["bench", config, *a.set, *_bench_args(a), "--out", out, "--name", name]), ""
    except SystemExit as exc:  # a UserError exits 2
        return int(exc.code or 0), ""
    except Exception as exc:  # noqa: BLE001 - one family's failure is a row of the table
        return 1, f"{type(exc).__name__}: {exc}"[:600]


def _row(name: str, rc: int, wall: float, log: str, path: str) -> dict:
    row = {"model": name, "exit": rc, "wall_s": round(wall, 1)}
    rep = json.load(open(path)) if rc == 0 and os.path.exists(path) else None
    if rep is None:
        row["error"] = " ".join(log.split())[-300:] or "no report"
        return row
    r = rep["rows"][0]
    row.update({k: rep.get(k) for k in ("grid", "video_tokens", "text_tokens", "blocks", "dtype", "flops_per_call",
                                        "activation_estimate_bytes")})
    row.update({k: r.get(k) for k in ("attention", "compile_s", "call_s", "achieved_flops_per_s", "mfu",
                                      "device_peak_bytes", "temp_bytes", "error")})
    row["attention_backends"] = sorted({c["backend"] for c in (r.get("attention_calls") or {}).values()})
    if row["error"] is None:
        del row["error"]
    return row


def _bytes(n: float | None) -> str:
    from vidax_core.placement.memory_plan import fmt_bytes

    return fmt_bytes(n) if n else "n/a"


def markdown(rows: list[dict], head: str) -> str:
    lines = [head, "", "| model | grid (f, h, w) | video tokens | blocks | attention | compile s | call s | "
             "TFLOP/s | MFU | device peak | XLA temp | dry-run activations | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "grid" not in r or r.get("error"):
            how = f"exit {r['exit']}" if r["exit"] else "the process ran; its call failed"
            lines.append(f"| {r['model']} | error ({how}): {r.get('error', '')} | | | | | | | | | | | {r['wall_s']} |")
            continue
        rate, mfu = r.get("achieved_flops_per_s"), r.get("mfu")
        lines.append(
            f"| {r['model']} | {'x'.join(map(str, r['grid']))} | {r['video_tokens']} | "
            f"{', '.join(f'{g} {n}' for g, n in r['blocks'].items())} | {', '.join(r['attention_backends'])} | "
            f"{r['compile_s']:.1f} | {r['call_s']:.3f} | {f'{rate / 1e12:.3g}' if rate else 'n/a'} | "
            f"{f'{mfu:.1%}' if mfu is not None else 'n/a'} | {_bytes(r.get('device_peak_bytes'))} | "
            f"{_bytes(r.get('temp_bytes'))} | {_bytes(r.get('activation_estimate_bytes'))} | {r['wall_s']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--models", default=",".join(MODELS), help="comma list of model ids (default: MODELS)")
    p.add_argument("--demos", action="store_true", help="the tiny demo configs, in this process (a CPU check)")
    p.add_argument("--blocks", type=int, default=1, help="blocks kept of every stacked group (default 1)")
    p.add_argument("--repeats", type=int, default=1, help="timed calls after the first (default 1)")
    p.add_argument("--attention", default="auto")
    p.add_argument("--budget", type=float, default=570.0, help="wall seconds for every model (default 570)")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds per model at most (default 150)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every model")
    a = p.parse_args(argv)
    start = time.perf_counter()
    out = os.path.join(a.out, "random_dit")
    os.makedirs(out, exist_ok=True)
    rows = []
    if a.demos:
        todo = [(c.removesuffix(".yaml"), os.path.join(ROOT, "configs", c)) for c in DEMOS]
    else:
        from vidax_core.plugins import get_plugins

        registry = get_plugins().registry
        todo = [(m, os.path.join(ROOT, registry.get(m).default_config)) for m in a.models.split(",") if m.strip()]
    rep = _write(a, rows, 0.0)
    for name, config in todo:
        left = a.budget - (time.perf_counter() - start)
        t0 = time.perf_counter()
        if left < 20:
            rows.append({"model": name, "exit": 125, "wall_s": 0.0, "error": "the budget is spent"})
            continue
        rc, log = (_in_process(config, a, out, name) if a.demos
                   else _subprocess(name, config, a, out, min(a.timeout, left)))
        rows.append(_row(name, rc, time.perf_counter() - t0, log, os.path.join(out, name + ".json")))
        print(f"[random_dit_all +{time.perf_counter() - start:.0f}s] {name}: exit {rc}", file=sys.stderr, flush=True)
        rep = _write(a, rows, time.perf_counter() - start)  # after every model: a killed run keeps its rows
    print(rep["markdown"], end="")
    return 0 if all(r["exit"] == 0 and not r.get("error") for r in rows) else 1


def _write(a: argparse.Namespace, rows: list[dict], wall: float) -> dict:
    head = (f"random DiTs at their reference sizes ({'demo configs' if a.demos else 'published layouts'}), "
            f"{a.blocks} block(s) of every group, batch 2, attention {a.attention}")
    rep = {"mode": "demos" if a.demos else "published", "blocks": a.blocks, "attention": a.attention,
           "overrides": a.set, "wall_s": round(wall, 1), "rows": rows, "markdown": markdown(rows, head)}
    with open(os.path.join(a.out, "random_dit_all.json"), "w") as f:
        json.dump(rep, f, indent=1, default=str)
    with open(os.path.join(a.out, "random_dit_all.md"), "w") as f:
        f.write(rep["markdown"])
    return rep


if __name__ == "__main__":
    sys.exit(main())
