"""``vidax bench``: time and memory of a configured run, optionally side by side with diffusers, over a sweep.

  vidax bench CONFIG.yaml [key=value ...] [--reference diffusers] [--sweep key=v1,v2,...] [--out DIR]
  vidax bench CONFIG.yaml --sweep lora=off,adapter.safetensors     (per-step time with / without an adapter)
  vidax bench --dit-only [model.id=ID] [--blocks 2] ...   (DiT-step and compile-time microbenchmarks, see bench.dit)

Every case (one vidax run per sweep value, one diffusers run per distinct model/sampling setting) runs in its own
Python subprocess by default, so peak RSS and device memory are per case and JAX and torch never share a device
allocator; ``--in-process`` runs them in this process instead (faster to start; peak RSS is then the process's
running maximum). The vidax side loads once (:class:`vidax_core.runner.loaded.LoadedModel`) and makes the video
twice, with the output video, metrics file and the persistent compilation cache switched off (so ``compile_s`` is a
cold compile; pass ``runtime.compilation_cache=true`` to measure a warm cache); the second video's total time
(``second_video_total_s``, and ``second_over_first``) is what a model kept loaded costs per video, and
``second_video_same`` says that the second video is the first one, bit for bit.

Metrics per case: load, encode, compile (first step minus the steady step), per-step (median of steps 1..),
decode, total, peak host RSS, peak device bytes where the backend reports them (``Device.memory_stats()`` on
GPU/TPU, ``torch.cuda.max_memory_allocated`` for the reference; "n/a" on CPU) and, for vidax, the peak bytes of
DiT weights resident on a device. With ``--reference ENGINE`` each row also gets the ratio vidax / ENGINE per
metric; the reference run comes from the family that registered the model (its ``diffusers_reference``), so a family
without one gets a one-line error before any case runs.
A step-cache sweep (``--sweep cache=...`` or ``cache.FIELD=...``) gets an uncached case first when it names none,
and each cached case's second-video sampling time as a ratio to it (``vs_uncached``).
Results go to ``DIR/NAME.json`` and ``DIR/NAME.md`` (the markdown table is printed too).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

from vidax_core.bench.arguments import DEFAULT_RANDOM_BLOCKS, check_args, random_blocks
from vidax_core.bench.report import _json_default, device_memory as _device_memory, machine_info, write_report

# metric key -> (table header, scale, format)
COLUMNS: list[tuple[str, str, float, str]] = [
    ("load_s", "load s", 1.0, "{:.2f}"),
    ("encode_s", "encode s", 1.0, "{:.2f}"),
    ("compile_s", "compile s", 1.0, "{:.2f}"),
    ("per_step_s", "per-step s", 1.0, "{:.4f}"),
    ("decode_s", "decode s", 1.0, "{:.2f}"),
    ("total_s", "total s", 1.0, "{:.2f}"),
    ("second_video_total_s", "2nd video s (loaded)", 1.0, "{:.2f}"),
    ("second_video_sampling_s", "2nd video sampling s", 1.0, "{:.2f}"),
    ("cache_skipped_steps", "cache-skipped steps", 1.0, "{}"),
    ("peak_rss_mb", "peak RSS MB", 1.0, "{:.0f}"),
    ("device_peak_bytes", "device peak MB", 2.0**-20, "{:.1f}"),
    ("peak_resident_weight_bytes", "DiT weights on device MB", 2.0**-20, "{:.1f}"),
    ("flops_per_step", "TFLOP/step", 1e-12, "{:.4g}"),
    ("mfu", "MFU %", 100.0, "{:.1f}"),
    ("attention_backend", "attention", 1.0, "{}"),
]
RATIO_KEYS = ("load_s", "encode_s", "compile_s", "per_step_s", "decode_s", "total_s",
              "peak_rss_mb", "device_peak_bytes")
REFERENCES = ("diffusers",)
# Settings that only change the vidax side: the reference is run once for all sweep values of these.
VIDAX_ONLY_PREFIXES = ("offload", "parallel", "attention", "runtime", "output")


def add_parser(sub) -> None:
    b = sub.add_parser(
        "bench", help="benchmark a config (per-step time, compile, decode, memory), optionally against diffusers",
        description="Benchmark a config: load, compile, steady per-step, decode and total time, peak host RSS and "
                    "device memory. Writes DIR/NAME.json and DIR/NAME.md. See docs/benchmarks.md.")
    b.add_argument("config", nargs="?", help="YAML config file (optional if model.id=... is given)")
    b.add_argument("overrides", nargs="*", help="key=value overrides, e.g. sampling.num_steps=10")
    b.add_argument("--reference", choices=REFERENCES,
                   help="also run the same checkpoint with this engine "
                        "(provided by the model's plugin) and add ratios")
    b.add_argument("--sweep", metavar="KEY=V1,V2,...",
                   help="repeat over one setting, e.g. offload.chunk_size=1,2,4 or parallel.sp=1,2; the shorthand "
                        "offload=off,1,2,all sweeps offload off and on at those chunk sizes (all = every block); "
                        "lora=off,FILE runs without and with an adapter and prints the per-step ratio")
    b.add_argument("--out", default="out/bench", metavar="DIR", help="output folder (default out/bench)")
    b.add_argument("--name", help="file stem of the outputs (default: the config's file name, or 'bench')")
    b.add_argument("--in-process", action="store_true", help="run the cases in this process, not one subprocess each")
    b.add_argument("--host-devices", type=int, metavar="N",
                   help="CPU only: make XLA expose N host devices to each case (for parallel.* sweeps)")
    b.add_argument("--profile", metavar="DIR", help="write a jax.profiler trace of each vidax case under DIR")
    b.add_argument("--quiet", "-q", action="store_true", help="no per-case progress lines")
    b.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    d = b.add_argument_group("DiT-only microbenchmarks (random weights, no checkpoint; the DiT and its reference "
                             "come from the plugin of model.id=..., default the first model whose plugin has them)")
    d.add_argument("--dit-only", action="store_true",
                   help="time one guided DiT step vidax vs the plugin's reference, compile time vs depth, VAE "
                        "compile vs frames")
    d.add_argument("--blocks", type=int, default=None,
                   help="blocks for the timed step (default 2); with --write-random-checkpoint, the blocks kept per "
                        "denoiser block group (default all)")
    d.add_argument("--compile-blocks", default="2,8",
                   help="block counts for the compile-time ratio (default 2,8: the blocks are one scan, so a deeper "
                        "model should compile about as fast; 2,30 compiles a 30-block DiT, over a minute on a CPU)")
    d.add_argument("--vae-frames", default="5,17,33", help="frame counts for VAE decode compile time (default 5,17,33)")
    d.add_argument("--vae-size", type=int, default=32, help="VAE decode height=width for the compile test (default 32)")
    d.add_argument("--repeats", type=int, default=3, help="timed DiT steps after the warm-up step (default 3)")
    d.add_argument("--skip", default="", help="comma list of parts to skip: step,compile,vae,reference")
    w = b.add_argument_group("a random checkpoint of any model id, numpy only (vidax_core.bench.random_checkpoint)")
    w.add_argument("--write-random-checkpoint", nargs=2, metavar=("MODEL_ID", "OUT"),
                   help="write MODEL_ID's published layout with random weights into the folder OUT and exit")
    w.add_argument("--weight-dtype", default="bfloat16", choices=("bfloat16", "float8_e4m3fn", "int8"),
                   help="storage of the denoiser's block matrices (default bfloat16; int8 with per-channel scales)")
    w.add_argument("--full-text-encoder", action="store_true",
                   help="every layer of the text encoders (default: one layer, full width and vocabulary)")
    w.add_argument("--fill", default="random", choices=("random", "zeros"),
                   help="zeros: headers only, the data left as holes of sparse files (layout checks)")
    r = b.add_argument_group("random full-width DiT (vidax bench --random-dit CONFIG [--published | "
                             "model.checkpoint=<config-only folder>]; see vidax_core.bench.random_dit)")
    r.add_argument("--random-dit", action="store_true",
                   help="time one DiT call of the run's architecture with random weights (no weights read)")
    r.add_argument("--published", action="store_true",
                   help="read the architecture from the model id's published layout that ships with its plugin "
                        "(no model.checkpoint, no download)")
    r.add_argument("--random-blocks", type=random_blocks, default=None, metavar="N",
                   help=f"keep N blocks of every stacked group (default {DEFAULT_RANDOM_BLOCKS}; 'all' for every "
                        "block: the published DiT at its full depth)")
    r.add_argument("--attention", default="auto", help="comma list of attention backends to time (default auto)")
    r.add_argument("--batch", type=int, default=2, help="model batch (default 2: the two CFG branches)")
    r.add_argument("--offload", default="", metavar="CHUNKS",
                   help="also stream the blocks from host memory at these chunk sizes, e.g. 1,2")
    b.set_defaults(func=cmd_bench)


# ----------------------------------------------------------------------------------------------------------------
# sweep and case planning


def offload_all_chunk(spec, ckpt, cfg, plugins) -> int:
    """The chunk size of ``--sweep offload=all``: every block of a group in one chunk.

    It must divide the block count of every offloaded group of every expert (a Wan2.2 A14B build is a list of
    two denoisers), so it is their greatest common divisor; groups of one size give exactly "all blocks".
    """
    import math

    from vidax_core.errors import UserError
    from vidax_core.runner.denoiser import build_dit

    built = build_dit(spec, ckpt, cfg, plugins)
    builds = list(built) if isinstance(built, (list, tuple)) else [built]
    counts = []
    for b in builds:
        counts += list((b.block_counts or {}).values())
    if not counts:
        raise UserError(f"--sweep offload=all: the plugin of {spec.id} reports no block groups to offload")
    return math.gcd(*counts)


def parse_sweep(text: str | None) -> tuple[str | None, list[str]]:
    from vidax_core.errors import UserError

    if not text:
        return None, []
    if "=" not in text:
        raise UserError(f"--sweep {text!r} is not KEY=V1,V2,... (e.g. --sweep offload.chunk_size=1,2,4)")
    key, values = text.split("=", 1)
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not key or not vals:
        raise UserError(f"--sweep {text!r} is not KEY=V1,V2,... (e.g. --sweep offload.chunk_size=1,2,4)")
    return key.strip(), vals


def sweep_overrides(key: str, value: str, block_count: Any = None) -> list[str]:
    """The key=value overrides of one sweep point (``offload=off|N|all`` is a shorthand)."""
    from vidax_core.errors import UserError

    if key == "cache" and value in OFF:
        return ["cache=null"]
    if key == "lora":  # lora=off,a.safetensors: without and with one adapter (scale 1), in the same bench run
        return ["lora=[]"] if value in ("off", "none", "null", "false") else [f"lora=[{{path: '{value}'}}]"]
    if key != "offload":
        return [f"{key}={value}"]
    if value in ("off", "false", "none", "0"):
        return ["offload.enabled=false"]
    if value == "all":
        n = block_count() if callable(block_count) else block_count
        return ["offload.enabled=true", f"offload.chunk_size={n}"]
    if not value.isdigit():
        raise UserError(f"--sweep offload=...: values are off, a chunk size or all, got {value!r}")
    return ["offload.enabled=true", f"offload.chunk_size={value}"]


OFF = ("off", "none", "null", "false")


def uncached_point(key: str | None, values: Sequence[str]) -> tuple[str, list[str]] | None:
    """The uncached case a step-cache sweep (``cache=...`` or ``cache.FIELD=...``) is measured against, when the
    sweep has none of its own: every cached row then gets its per-video time as a ratio to it."""
    if key is None or not (key == "cache" or key.startswith("cache.")):
        return None
    if key == "cache" and any(v in OFF for v in values):
        return None
    return ("cache=off", ["cache=null"])


def vs_uncached(rows: list[dict[str, Any]]) -> list[str]:
    """One line per cached row of a step-cache sweep: its second video's sampling time (the DiT steps of a loaded
    model, compile excluded) over the uncached row's, with the steps it skipped; [] when no row is uncached."""
    base = next((r for r in rows if r.get("uncached")), None)
    if base is None:
        return []
    t0 = base["vidax"].get("second_video_sampling_s")
    out = []
    for r in rows:
        if r is base:
            continue
        t = r["vidax"].get("second_video_sampling_s")
        ratio = t / t0 if t and t0 else None
        r["sampling_vs_uncached"] = ratio
        out.append(f"{r['label']}: {ratio:.2f}× the uncached DiT time per video "
                   f"({r['vidax'].get('cache_skipped_steps', 0)} of {r['vidax'].get('num_steps')} steps skipped)"
                   if ratio is not None else f"{r['label']}: n/a")
    return out


# Layered over the user's YAML, under their key=value arguments (those still win): no video, no metrics file, cold
# compiles.
BENCH_LAYER = {"output": {"path": "", "metrics": None, "save_latents": None, "save_frames": None,
                          "save_audio": None},
               "runtime": {"compilation_cache": False}}


def resolve_case(config_path: str | None, overrides: Sequence[str], extra: Sequence[str], preset_for):
    """defaults < model preset < YAML < bench layer < key=value < sweep point, validated."""
    from vidax_core import config as config_mod
    from vidax_core.errors import UserError

    user = config_mod.load_yaml(config_path) if config_path else {}
    cli = config_mod.parse_overrides(list(overrides))
    point = config_mod.parse_overrides(list(extra))
    model_id = config_mod.model_id_of(user, cli, point)
    if model_id is None:
        raise UserError("no model chosen: set model.id in the config or pass model.id=... (see `vidax list-models`)")
    preset = preset_for(str(model_id))
    return config_mod.validate(config_mod.merge(config_mod.defaults_dict(), preset, user, BENCH_LAYER, cli, point))


def _reference_key(cfg_dict: dict) -> str:
    relevant = {k: v for k, v in cfg_dict.items() if k not in VIDAX_ONLY_PREFIXES}
    return json.dumps(relevant, sort_keys=True, default=str)


# ----------------------------------------------------------------------------------------------------------------
# the cases themselves (run in a worker subprocess or in-process)


def run_vidax_case(cfg_dict: dict, profile_dir: str | None = None, quiet: bool = True) -> dict[str, Any]:
    import jax
    import numpy as np

    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins
    from vidax_core.report.progress import Reporter

    from vidax_core.runner.loaded import LoadedModel

    cfg = config_mod.validate(cfg_dict)
    plugins = get_plugins()
    reporter = Reporter(quiet=quiet)
    model = LoadedModel(cfg, plugins, reporter)  # loaded once: the second video shows what a resident model costs
    try:
        if profile_dir:
            os.makedirs(profile_dir, exist_ok=True)
            with jax.profiler.trace(profile_dir):
                result = model.generate(cfg)
        else:
            result = model.generate(cfg)
        again = model.generate(cfg, write_outputs=False)
        second = again.metrics
    finally:
        model.close()
    m = dict(result.metrics)
    # the same call again on the loaded model: the same video, bit for bit (a call keeps no state of an earlier one)
    m["second_video_same"] = bool(np.array_equal(result.frames, again.frames)
                                  and all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(result.latents),
                                                                               jax.tree.leaves(again.latents))))
    m["second_video_total_s"] = second["total_s"]
    m["second_video_per_step_s"] = second["per_step_s"]
    m["second_video_step_times_s"] = second.get("step_times_s")  # every step: the first call's against these
    m["second_video_sampling_s"] = second["sampling_s"]  # every step of a loaded model's video, compile excluded
    cache = second.get("cache")
    m["cache_skipped_steps"] = len(cache["skipped_steps"]) if isinstance(cache, dict) else 0
    m["second_over_first"] = second["total_s"] / m["total_s"] if m["total_s"] else None
    m.update(_device_memory())
    m["engine"] = "vidax"
    m["jax"] = jax.__version__
    m["devices"] = [f"{d.platform}:{getattr(d, 'device_kind', '')}" for d in jax.local_devices()]
    m["dtype"] = cfg.model.dtype or "float32"
    return m


def run_reference_case(engine: str, cfg_dict: dict, ckpt_dir: str) -> dict[str, Any]:
    """The reference run of ``engine``, provided by the plugin that registered the model."""
    from vidax_core import config as config_mod
    from vidax_core.bench.reference import run_reference
    from vidax_core.plugins import get_plugins

    cfg = config_mod.validate(cfg_dict)
    plugins = get_plugins()
    return run_reference(plugins, plugins.registry.get(cfg.model.id), engine, ckpt_dir, cfg)


def _worker_main(argv: Sequence[str]) -> int:
    """``python -m vidax_core.bench.command --worker SPEC.json RESULT.json``: run one case, write its metrics."""
    spec_path, result_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    try:
        if spec["engine"] == "vidax":
            metrics = run_vidax_case(spec["config"], spec.get("profile"), quiet=spec.get("quiet", True))
        else:
            metrics = run_reference_case(spec["engine"], spec["config"], spec["ckpt_dir"])
        out = {"ok": True, "metrics": metrics}
    except Exception as exc:  # noqa: BLE001 - reported by the parent as a failed case
        from vidax_core.errors import UserError

        out = {"ok": False, "user_error": isinstance(exc, UserError), "error": f"{type(exc).__name__}: {exc}"}
    with open(result_path, "w") as f:
        json.dump(out, f, default=_json_default)
    return 0 if out["ok"] else 1


def _run_case(engine: str, cfg_dict: dict, *, ckpt_dir: str | None, in_process: bool, env: dict | None,
              profile: str | None, verbose: bool) -> dict[str, Any]:
    from vidax_core.errors import UserError

    if in_process:
        if engine == "vidax":
            return run_vidax_case(cfg_dict, profile, quiet=not verbose)
        return run_reference_case(engine, cfg_dict, ckpt_dir)
    with tempfile.TemporaryDirectory(prefix="vidax-bench-") as tmp:
        spec_path, result_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump({"engine": engine, "config": cfg_dict, "ckpt_dir": ckpt_dir, "profile": profile,
                       "quiet": not verbose}, f, default=_json_default)
        proc = subprocess.run([sys.executable, "-m", "vidax_core.bench.command", "--worker", spec_path, result_path],
                              env=env, stdout=subprocess.PIPE, stderr=None if verbose else subprocess.PIPE, text=True)
        if not os.path.exists(result_path):
            tail = (proc.stderr or "").strip().splitlines()[-3:]
            raise RuntimeError(f"{engine} case died (exit {proc.returncode}): {' | '.join(tail)}")
        with open(result_path) as f:
            res = json.load(f)
    if not res["ok"]:
        if res.get("user_error"):
            raise UserError(res["error"].split(": ", 1)[-1])
        raise RuntimeError(f"{engine} case failed: {res['error']}")
    return res["metrics"]


# ----------------------------------------------------------------------------------------------------------------
# reporting


def ratios(ours: dict, ref: dict) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k in RATIO_KEYS:
        a, b = ours.get(k), ref.get(k)
        out[k] = float(a) / float(b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None
    return out


def _cell(value: Any, scale: float, fmt: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (int, float)):
        return fmt.format(value * scale)
    return str(value)


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    ref_name = report.get("reference")
    sweeping = len(rows) > 1
    head = ["case", "engine"] + [h for _, h, _, _ in COLUMNS] + (
        ["per-step / first case", "2nd video sampling / first case"] if sweeping else [])
    lines = [
        f"<!-- {report['command']} -->",
        f"vidax bench, {report['created']}; backend {report['machine'].get('jax_backend', '?')} "
        f"({', '.join(sorted(set(report['machine'].get('jax_devices', []))))}), "
        f"{report['machine'].get('cpu_count')} CPUs, load average at start {report['machine'].get('load_avg_1m', '?')}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    first_step = rows[0]["vidax"].get("per_step_s") if rows else None
    first_sampling = rows[0]["vidax"].get("second_video_sampling_s") if rows else None
    for row in rows:
        v = row["vidax"]
        cells = [row["label"], "vidax"] + [_cell(v.get(k), s, f) for k, _, s, f in COLUMNS]
        if sweeping:
            ps = v.get("per_step_s")
            cells.append(f"{ps / first_step:.2f}×" if ps and first_step else "n/a")
            sv = v.get("second_video_sampling_s")
            cells.append(f"{sv / first_sampling:.2f}×" if sv and first_sampling else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
        if row.get("reference") is not None:
            r = row["reference"]
            cells = ([row["label"], ref_name] + [_cell(r.get(k), s, f) for k, _, s, f in COLUMNS]
                     + (["", ""] if sweeping else []))
            lines.append("| " + " | ".join(cells) + " |")
            rt = row["ratio"]
            cells = [row["label"], f"vidax/{ref_name}"] + [
                (f"{rt[k]:.3g}×" if rt.get(k) is not None else "n/a") if k in RATIO_KEYS else ""
                for k, _, _, _ in COLUMNS] + (["", ""] if sweeping else [])
            lines.append("| " + " | ".join(cells) + " |")
    cached = report.get("vs_uncached") or []
    if cached:
        lines += ["", "DiT time per video against uncached, same run (2nd video sampling s / the cache=off row's):"]
        lines += [f"- {line}" for line in cached]
    lines.append("")
    lines += lora_ratio_lines(report)
    lines.append("per-step = median of steps 2..N (the first, compiling/warm-up step excluded, for both engines); "
                 "compile = first step − per-step; n/a = not reported by the backend.")
    return "\n".join(lines) + "\n"


def lora_ratio_lines(report: dict[str, Any]) -> list[str]:
    """For ``--sweep lora=off,FILE...``: the per-step time of each adapter's case over the case without one."""
    sweep = report.get("sweep") or {}
    rows = report["rows"]
    without = next((r for r in rows if r["overrides"] == ["lora=[]"]), None)
    if sweep.get("key") != "lora" or without is None:
        return []
    b = without["vidax"].get("per_step_s")
    mode = (report.get("config") or {}).get("lora_mode", "fused")
    out = []
    for r in rows:
        a = r["vidax"].get("per_step_s")
        if r is without or not a or not b:
            continue
        out.append(f"per-step with / without the adapter ({r['label']}, lora_mode {mode}): {a / b:.3f}x "
                   f"({a:.4g} s vs {b:.4g} s, same bench run)")
    return out + [""] if out else []


# ----------------------------------------------------------------------------------------------------------------
# the command


def cmd_bench(args: argparse.Namespace) -> int:
    check_args(args)  # every flag before any work
    if getattr(args, "write_random_checkpoint", None):
        from vidax_core.bench.random_checkpoint import write_random_checkpoint

        model_id, out = args.write_random_checkpoint
        summary = write_random_checkpoint(model_id, out, blocks=args.blocks, weight_dtype=args.weight_dtype,
                                          full_text_encoder=args.full_text_encoder, fill=args.fill,
                                          log=(lambda _m: None) if args.quiet else print)
        total = sum(c.get("bytes", 0) for c in summary["components"].values())
        print(f"wrote {out}: {model_id} with random weights, {total / 2**30:.2f} GiB in {summary['seconds']} s")
        return 0
    if getattr(args, "random_dit", False):
        from vidax_core.bench import random_dit

        return random_dit.main(args)
    if args.dit_only:
        from vidax_core.bench import dit as bench_dit

        return bench_dit.main(args)

    from vidax_core import config as config_mod
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    preset = plugins.preset_for
    user = list(args.overrides or [])
    key, values = parse_sweep(args.sweep)

    base_cfg = resolve_case(args.config, user, [], preset)
    spec = plugins.registry.get(base_cfg.model.id)
    ckpt = None

    def checkpoint():
        nonlocal ckpt
        if ckpt is None:
            ckpt = checkpoint_for_run(base_cfg, spec, plugins)
        return ckpt

    def block_count():
        return offload_all_chunk(spec, checkpoint(), base_cfg, plugins)

    points: list[tuple[str, list[str]]] = []
    if key is None:
        points.append(("base", []))
    else:
        base = uncached_point(key, values)
        if base is not None:
            points.append(base)
        for v in values:
            points.append((f"{key}={v}", sweep_overrides(key, v, block_count)))
    if args.reference:  # fail in one line before any work if the model has no reference or it cannot run
        from vidax_core.bench.reference import reference_runner

        reference_runner(plugins, spec, args.reference, checkpoint().root, base_cfg)
    cases = []
    for label, extra in points:
        cfg = resolve_case(args.config, user, extra, preset)  # validates every point before the first case runs
        cases.append((label, extra, config_mod.to_dict(cfg)))

    env = dict(os.environ)
    if args.host_devices:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "")
                            + f" --xla_force_host_platform_device_count={args.host_devices}").strip()
        if args.in_process:
            os.environ["XLA_FLAGS"] = env["XLA_FLAGS"]  # effective only if jax has not started a backend yet

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    machine = machine_info() if args.in_process else _machine_info_subprocess(env)
    started = time.perf_counter()
    ref_cache: dict[str, dict] = {}
    rows = []
    for n, (label, extra, cfg_dict) in enumerate(cases, 1):
        say(f"[{n}/{len(cases)}] {label}: vidax ...")
        profile = os.path.join(args.profile, label.replace("=", "-").replace("/", "_")) if args.profile else None
        ours = _run_case("vidax", cfg_dict, ckpt_dir=None, in_process=args.in_process, env=env, profile=profile,
                         verbose=False)
        say(f"    vidax {ours['per_step_s']:.4f} s/step, compile {ours['compile_s']:.2f} s, "
            f"total {ours['total_s']:.2f} s"
            + (f"; a second video from the loaded model {ours['second_video_total_s']:.2f} s "
               f"({ours['second_over_first']:.2f}x the first)" if ours.get("second_over_first") else ""))
        row: dict[str, Any] = {"label": label, "overrides": extra, "vidax": ours, "reference": None, "ratio": None,
                               "uncached": bool(key) and (key == "cache" or key.startswith("cache."))
                               and "cache=null" in extra}
        if args.reference:
            rkey = _reference_key(cfg_dict)
            if rkey not in ref_cache:
                say(f"[{n}/{len(cases)}] {label}: {args.reference} ...")
                ref_cache[rkey] = _run_case(args.reference, cfg_dict, ckpt_dir=checkpoint().root,
                                            in_process=args.in_process, env=env, profile=None, verbose=False)
                r = ref_cache[rkey]
                say(f"    {args.reference} {r['per_step_s']:.4f} s/step, total {r['total_s']:.2f} s")
            row["reference"] = ref_cache[rkey]
            row["ratio"] = ratios(ours, ref_cache[rkey])
        rows.append(row)

    name = args.name or (os.path.splitext(os.path.basename(args.config))[0] if args.config else "bench")
    if key and not args.name:
        name += f"-sweep-{key}"
    report: dict[str, Any] = {
        "command": "vidax bench " + " ".join(_argv_for_record(args)),
        "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine,
        "isolation": "in-process" if args.in_process else "subprocess per case",
        "reference": args.reference,
        "sweep": {"key": key, "values": values} if key else None,
        "config": config_mod.to_dict(base_cfg),
        "bench_wall_s": None,
        "rows": rows,
    }
    report["bench_wall_s"] = time.perf_counter() - started
    report["vs_uncached"] = vs_uncached(rows)  # a step-cache sweep: each cached row against the uncached one
    report["markdown"] = markdown(report)
    jpath, mpath = write_report(report, args.out, name)
    print(report["markdown"], end="")
    say(f"wrote {jpath} and {mpath}")
    return 0


def _argv_for_record(args: argparse.Namespace) -> list[str]:
    out = [args.config] if args.config else []
    out += list(args.overrides or [])
    for flag, val in (("--reference", args.reference), ("--sweep", args.sweep), ("--out", args.out),
                      ("--host-devices", args.host_devices)):
        if val:
            out += [flag, str(val)]
    if args.in_process:
        out.append("--in-process")
    return out


def _machine_info_subprocess(env: dict) -> dict[str, Any]:
    """Machine facts as a case process sees them (device list included) without starting JAX's backend here."""
    code = "import json, vidax_core.bench.command as b; print(json.dumps(b.machine_info()))"
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001 - facts are best effort
        info = {"platform": platform.platform(), "cpu_count": os.cpu_count()}
        return info


if __name__ == "__main__":  # pragma: no cover - the case worker
    sys.exit(_worker_main(sys.argv[2:] if sys.argv[1:2] == ["--worker"] else sys.argv[1:]))
