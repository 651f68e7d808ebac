"""Does the dry run's host line agree with what a run holds? For each model id of 13B parameters or more: write its
published layout with fp8 blocks as sparse files (``vidax bench --write-random-checkpoint --fill zeros``), dry-run
it on this machine, run it at a tiny size with 8-bit weights and offload (one step), and compare the dry run's
``host memory ~X`` with the run's peak anonymous memory (``peak_anon_mb`` of its metrics).

  python scripts/memory_agreement.py OUT_DIR [--models a,b] [--storage auto|host|disk] [--chunk 2] [--budget-gib 19]

Each run is a process of its own (its peak is its own). ``--storage auto`` uses ``host`` where the dry run says the
run fits in ``--budget-gib`` of host memory, else ``disk``. Writes OUT_DIR/<id>.json (the dry run's placement
block, the run's metrics, the ratio) and OUT_DIR/agreement.md; the checkpoints live in OUT_DIR/ckpt (sparse) and
and the disk-storage cache (OUT_DIR/offload-cache) are removed after each id.
Torch-free; on this repository's 2-core CPU machine an id takes one to three minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from memory_table import BIG, _params  # noqa: E402

# The smallest valid video per family: frames the VAE's temporal stride accepts, a size its patching accepts.
TINY = {"ltx": ("64", "64", "9"), "cosmos3": ("64", "64", "5"), "kandinsky": ("64", "64", "5")}
GIB = r"([\d.]+) (B|KiB|MiB|GiB)"
UNIT = {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}


def host_line(text: str) -> float | None:
    """The dry run's ``host memory ~X`` in MiB."""
    m = re.search(r"^  host memory ~" + GIB, text, re.M)
    return float(m.group(1)) * UNIT[m.group(2)] if m else None


def tiny_fix(err: str) -> list[str] | None:
    """The keys a one-step tiny run of a model needs, from its refusal: a pyramid's stages one step each, a fixed
    sigma list's step count, a size multiple."""
    if "pyramid stages" in err:
        return ["options.pyramid_num_inference_steps_list=[1,1,1]", "sampling.num_steps=3"]
    m = re.search(r"options\.sigmas has (\d+) entries", err)
    if m:
        return [f"sampling.num_steps={m.group(1)}"]
    m = re.search(r"causal_block_size=(\d+) must divide", err)
    if m:  # one window of that many latent frames
        return [f"sampling.num_frames={4 * (int(m.group(1)) - 1) + 1}"]
    m = re.search(r"must be a multiple of (\d+)", err)
    if m:
        return [f"sampling.height={m.group(1)}", f"sampling.width={m.group(1)}"]
    return None


def ram_mib() -> float:
    import psutil

    return psutil.virtual_memory().total / 2**20


def vidax(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidax_core.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--models", default="")
    p.add_argument("--storage", default="auto", choices=("auto", "host", "disk"))
    p.add_argument("--chunk", type=int, default=2)
    p.add_argument("--budget-gib", type=float, default=19.0)
    a = p.parse_args()
    from PIL import Image

    from vidax_core.bench.random_checkpoint import write_random_checkpoint
    from vidax_core.errors import UserError
    from vidax_core.plugins import get_plugins

    os.makedirs(a.out, exist_ok=True)
    os.environ["VIDAX_OFFLOAD_CACHE"] = os.path.join(os.path.abspath(a.out), "offload-cache")  # removed per id
    png = os.path.join(a.out, "first_frame.png")
    Image.new("RGB", (64, 64), (90, 120, 150)).save(png)
    plugins = get_plugins()
    wanted = [m for m in a.models.split(",") if m]
    rows = []
    queue = [(spec, ("float8_e4m3fn", "bfloat16")) for spec in sorted(plugins.registry, key=lambda s: s.id)]
    while queue:
        spec, files = queue.pop(0)
        if (wanted and spec.id not in wanted) or not spec.default_config:
            continue
        folder = os.path.join(a.out, "ckpt", spec.id)
        h, w, f = TINY.get(spec.family, ("64", "64", "5"))
        written = None
        for weights in files:  # a family that refuses plain fp8 files quantizes bf16 ones at load
            shutil.rmtree(folder, ignore_errors=True)
            try:
                write_random_checkpoint(spec.id, folder, fill="zeros", weight_dtype=weights, log=lambda _m: None,
                                        plugins=plugins)
            except UserError as e:
                print(f"{spec.id}: not written ({e})", flush=True)
                break
            if _params(folder) < BIG:
                break
            keys = [f"model.checkpoint={folder}", "model.weight_dtype=float8_e4m3fn", "offload.enabled=true",
                    f"offload.chunk_size={a.chunk}", f"sampling.height={h}", f"sampling.width={w}",
                    f"sampling.num_frames={f}", "sampling.num_steps=1"]
            if "multiscale: true" in open(os.path.join(ROOT, spec.default_config)).read():
                keys.append("options.multiscale=false")
            if "t2v" not in spec.tasks:
                keys.append(f"image={png}")
            for _fix in range(3):  # the run's own refusals name what a tiny run of this model needs
                dry = vidax("run", os.path.join(ROOT, spec.default_config), *keys, "offload.storage=host",
                            "--dry-run")
                fixed = tiny_fix(dry.stderr) if dry.returncode else None
                if not fixed:
                    break
                keys = [k for k in keys if k.split("=")[0] not in {x.split("=")[0] for x in fixed}] + fixed
            if dry.returncode == 0:
                written = weights
                break
            print(f"{spec.id}: {weights} file refused ({(dry.stderr.strip().splitlines() or [''])[-1][:160]})",
                  flush=True)
        if written is None:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        held = host_line(dry.stdout)
        storage = a.storage
        if storage == "auto":
            storage = "host" if held is not None and held <= a.budget_gib * 1024 else "disk"
        keys.append(f"offload.storage={storage}")
        dry = vidax("run", os.path.join(ROOT, spec.default_config), *keys, "--dry-run")
        metrics = os.path.join(a.out, f"{spec.id}.metrics.json")
        t0 = time.time()
        predicted = host_line(dry.stdout)
        if predicted and predicted > ram_mib() and "model.dtype=bfloat16" not in keys and written:
            # an LLM prompt encoder computes in the weight dtype: bf16 halves it (the dry run says by how much)
            keys.append("model.dtype=bfloat16")
            dry = vidax("run", os.path.join(ROOT, spec.default_config), *keys, "--dry-run")
            predicted = host_line(dry.stdout)
        if predicted and predicted > ram_mib():  # the dry run says it cannot fit: the OOM killer would end it
            row = {"id": spec.id, "storage": storage, "weights": written, "dry_run_host_mib": predicted,
                   "peak_anon_mib": None, "ratio": None, "exit": None, "run_s": 0.0,
                   "error": f"not run: the dry run's {predicted / 1024:.1f} GiB exceed this machine's "
                            f"{ram_mib() / 1024:.1f} GiB of memory",
                   "placement": re.findall(r"^(?:placement:|  ).*$", dry.stdout.split("resolved config:")[0], re.M)}
            rows.append(row)
            json.dump(row, open(os.path.join(a.out, f"{spec.id}.json"), "w"), indent=1)
            print(f"{spec.id}: {row['error']}", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
            continue
        run = vidax("run", os.path.join(ROOT, spec.default_config), *keys, "output.overwrite=true",
                    f"output.path={os.path.join(a.out, spec.id + '.mp4')}", f"output.metrics={metrics}")
        if run.returncode == 2 and written != "bfloat16" and "FP8" in run.stderr:  # refused when its run loads
            print(f"{spec.id}: {written} file refused by the run: again with bf16 weights", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
            queue.insert(0, (spec, ("bfloat16",)))
            continue
        m = json.load(open(metrics)) if run.returncode == 0 and os.path.exists(metrics) else {}
        measured = m.get("peak_anon_mb")
        row = {"id": spec.id, "storage": storage, "weights": written, "config": spec.default_config, "keys": keys,
               "dry_run_host_mib": predicted, "peak_anon_mib": measured,
               "ratio": round(predicted / measured, 3) if predicted and measured else None,
               "run_s": round(time.time() - t0, 1), "exit": run.returncode,
               "placement": re.findall(r"^(?:placement:|  ).*$", dry.stdout.split("resolved config:")[0], re.M),
               "error": (run.stderr.strip().splitlines() or [""])[-1] if run.returncode else None,
               "metrics": m}
        rows.append(row)
        json.dump(row, open(os.path.join(a.out, f"{spec.id}.json"), "w"), indent=1)
        print(f"{spec.id}: {storage} dry {predicted} MiB, measured {measured} MiB, ratio {row['ratio']}, "
              f"{row['run_s']} s{'' if not run.returncode else ' FAILED: ' + str(row['error'])}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(os.environ["VIDAX_OFFLOAD_CACHE"], ignore_errors=True)
    lines = ["| model id | DiT file | storage | dry run host MiB | measured peak anonymous MiB | dry / measured | "
             "run s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['weights']} | {r['storage']} | {r['dry_run_host_mib'] or '-'} | "
                     f"{r['peak_anon_mib'] or r['error'] or '-'} | {r['ratio'] or '-'} | {r['run_s']} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "agreement.md"), "w").write(text)
    print(text)
    return 0 if all(abs(r["ratio"] - 1) <= 0.10 for r in rows if r["ratio"]) else 1


if __name__ == "__main__":
    sys.exit(main())
