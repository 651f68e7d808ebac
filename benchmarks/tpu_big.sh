#!/usr/bin/env bash
# The flagship models end to end on one accelerator chip, random full-size weights written with numpy.
#
#   benchmarks/tpu_big.sh OUT_DIR CASE [--wheels DIR]
#       CASE: wan21-14b | wan21-14b-720p | wan22-a14b | hunyuan15-480p | ltx2-19b
#
# Each case fits one command of at most 10 minutes: the checkpoint is written once under WEIGHTS (default
# /tmp/vidax-big/<model id>, a cut one under <model id>-blocksN / -text1; kept while the machine stays warm, so a
# second case or a rerun skips the write), then one `vidax run` at the model's reference size with 8-bit weights and
# offload, STEPS sampling steps (default 4: the
# per-step time is the median of the steps after the first), the whole video decoded and written (the mp4 under
# WEIGHTS, too large to bring back). Results: OUT_DIR/<case>.json (the run's metrics: s/step, MFU, compile,
# decode, peak device and host memory, the writer's summary) and OUT_DIR/<case>.md. Where imageio-ffmpeg cannot be
# installed the frames are written as WEIGHTS/<case>.frames.npy instead of the mp4.
#   wan21-14b       Wan2.1-T2V-14B, 480x832x81, fp8 blocks, the full UMT5-XXL encoder, offload chunk 2
#   wan22-a14b      Wan2.2-T2V-A14B, the same, both experts streamed from a disk cache (two 14B experts do not fit
#                   a 40 GB host beside the TPU runtime in pinned memory)
#   wan21-14b-720p  Wan2.1-T2V-14B at 1280x720x81, the same, one model call per guidance branch (batched, the
#                   activations of 720p are 13.6 GiB: the second step's program did not load on the v5e); the run
#                   decodes in 256-pixel tiles by itself (the untiled decode program asks the v5e for 25.5 GB)
#   hunyuan15-480p  HunyuanVideo-1.5 T2V 480p, 848x480x121, fp8 blocks, the full Qwen2.5-VL-7B text tower; the run
#                   decodes in 128-pixel tiles by itself (each tile decodes all 121 frames at once: one of the
#                   reference's 256-pixel tiles needs ~22.7 GiB by the dry run, a 128-pixel one 5.7)
#   ltx2-19b        LTX-2 19B dev at its reference size, fp8 blocks from a disk cache, the full Gemma-3 12B encoder
# Before the run, its dry run (the same config) is kept as OUT_DIR/<case>.dry.txt, and the run's resident memory is
# sampled every second into OUT_DIR/<case>.rss.txt, to hold the dry run's host line against what the run held.
# FILL=random|zeros picks the writer's weights (default zeros: sparse files that cost the host neither time nor
# memory to write; the step times do not depend on the values).
# PREPARE=1 only writes the checkpoint and builds what a first run builds (the disk offload cache) with one step at
# a small size, so the next command's run at the reference size loads in seconds: a case whose first run (writing
# a 17-27 GiB cache at ~120-135 MB/s on the v5e host) and decode do not fit one 10-minute command (ltx2-19b).
# TWICE=1 makes the video twice with one loaded model (`vidax bench --in-process --skip reference`: OUT_DIR/
# <case>.bench.json): the second call's prompts come from the embedding cache, no encoder runs; `per_step_s` of the
# first call against `second_video_per_step_s`, and each call's step times (`step_times_s`,
# `second_video_step_times_s`).
# --wheels DIR installs vidax from wheels first (benchmarks/accelerator.sh --wheels, TPU form). PYTHON picks the
# interpreter (default: the project's .venv, else python3); EXTRA adds run keys; BLOCKS=N writes N blocks per group
# (to check the script itself on a small machine); FULL_TEXT=0 a one-layer text encoder: the stand-in run that the
# real encoder's step time is held against (LTX-2's connectors and Cosmos' DiT are scaled to the one layer).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: benchmarks/tpu_big.sh OUT_DIR CASE [--wheels DIR]}
CASE=${2:?usage: benchmarks/tpu_big.sh OUT_DIR CASE [--wheels DIR]}
shift 2
WHEELS=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS=${2:?--wheels needs a folder}; shift ;;
    *) echo "error: unknown argument $1 (use --wheels DIR)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
start=$(date +%s)
log() { echo "[tpu_big.sh +$(( $(date +%s) - start ))s] $*" >&2; }
mkdir -p "$OUT"
if [ -n "$WHEELS" ]; then
  SITE=${SITE:-/tmp/vidax-site}
  stamp=$(cd "$WHEELS" && cksum ./*.whl | cksum)
  if [ ! -d "$SITE/vidax_core" ] || [ "$(cat "$SITE/.wheels" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$SITE"  # a site kept from other wheels (an earlier command on this machine) would run old code
    log "installing vidax from $WHEELS into $SITE"
    PIP=("$PY" -m pip install -q --isolated --disable-pip-version-check --only-binary=:all: --target "$SITE")
    PIP_CONFIG_FILE=/dev/null "${PIP[@]}" --index-url "${TPU_INDEX:-file:///opt/pypi/simple}" --find-links "$WHEELS" \
      "flax>=0.12,<=0.12.8" omegaconf pluggy safetensors huggingface_hub tokenizers sentencepiece jinja2 imageio \
      tqdm psutil pillow ml_dtypes \
      && PIP_CONFIG_FILE=/dev/null "${PIP[@]}" --no-index --no-deps --upgrade "$WHEELS"/vidax_*.whl \
      || { echo "error: installing into $SITE failed" >&2; exit 2; }
    PIP_CONFIG_FILE=/dev/null "${PIP[@]}" --no-deps --index-url "${TPU_INDEX:-file:///opt/pypi/simple}" \
      --find-links "$WHEELS" imageio-ffmpeg || log "imageio-ffmpeg is neither in the index nor in $WHEELS"
    echo "$stamp" > "$SITE/.wheels"
  fi
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$SITE
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
STEPS=${STEPS:-4}
case "$CASE" in
  wan21-14b) ID=wan2.1-t2v-14b CONFIG=configs/wan21_14b_480p.yaml
             RUN=(offload.enabled=true offload.chunk_size=2) ;;
  wan22-a14b) ID=wan2.2-t2v-a14b CONFIG=configs/wan22_t2v_a14b_480p.yaml
              RUN=(offload.enabled=true offload.chunk_size=2 offload.storage=disk) ;;
  wan21-14b-720p) ID=wan2.1-t2v-14b CONFIG=configs/wan21_14b_720p.yaml
                  RUN=(offload.enabled=true offload.chunk_size=2 runtime.batch_branches=false) ;;
  hunyuan15-480p) ID=hunyuanvideo-1.5-t2v-480p CONFIG=configs/hunyuan15_t2v_480p.yaml
                  RUN=(offload.enabled=true offload.chunk_size=2) ;;
  ltx2-19b) ID=ltx-2-19b-dev CONFIG=configs/ltx2_19b_dev.yaml
            RUN=(offload.enabled=true offload.chunk_size=2 offload.storage=disk) ;;
  *) echo "error: unknown case $CASE (wan21-14b, wan21-14b-720p, wan22-a14b, hunyuan15-480p, ltx2-19b)" >&2
     exit 2 ;;
esac
WEIGHTS=${WEIGHTS:-/tmp/vidax-big}
if [ "${FULL_TEXT:-1}" = 1 ]; then TEXT=(--full-text-encoder) TEXT_SAID="its full text encoder" TEXT_DIR=""
else TEXT=() TEXT_SAID="a one-layer text encoder" TEXT_DIR=-text1; fi
# one folder per variant: a cut checkpoint (BLOCKS, FULL_TEXT=0) is never taken for the full one, nor the reverse
CK="$WEIGHTS/${ID}${BLOCKS:+-blocks$BLOCKS}$TEXT_DIR"
if [ ! -f "$CK/random_checkpoint.json" ]; then
  rm -rf "$CK"
  log "writing $ID with random fp8 weights and $TEXT_SAID into $CK"
  "$PY" -m vidax_core.cli bench --write-random-checkpoint "$ID" "$CK" --weight-dtype float8_e4m3fn \
    "${TEXT[@]}" ${BLOCKS:+--blocks $BLOCKS} --fill "${FILL:-zeros}" \
    || { echo "error: writing the checkpoint failed" >&2; exit 1; }
fi
if "$PY" -c 'import imageio_ffmpeg' 2>/dev/null; then OUTPUT=("output.path=$WEIGHTS/$CASE.mp4")
else  # no ffmpeg on the machine: the decoded frames are written as float32 .npy instead of the mp4
  OUTPUT=(output.path=null "output.save_frames=$WEIGHTS/$CASE.frames.npy")
  log "imageio-ffmpeg is missing: the video's frames go to $WEIGHTS/$CASE.frames.npy"
fi
log "running $CONFIG, $STEPS steps: ${RUN[*]} ${EXTRA:-}"
export VIDAX_OFFLOAD_CACHE=${VIDAX_OFFLOAD_CACHE:-$WEIGHTS/offload-cache}
ARGS=("$CONFIG" "model.checkpoint=$CK" "sampling.num_steps=$STEPS" "${RUN[@]}" ${EXTRA:-} "${OUTPUT[@]}"
      output.overwrite=true "output.metrics=$OUT/$CASE.run.json")
if [ "${PREPARE:-0}" = 1 ]; then  # the same placement keys at a small size: the cache the real run will find
  log "preparing $CASE: one step at 256x256x9 builds the offload cache"
  "$PY" -m vidax_core.cli run "$CONFIG" "model.checkpoint=$CK" "${RUN[@]}" ${EXTRA:-} sampling.num_steps=1 \
    sampling.height=256 sampling.width=256 sampling.num_frames=9 output.path=null --quiet
  rc=$?
  log "prepared $CASE (exit $rc) in $(( $(date +%s) - start )) s"
  exit "$rc"
fi
if [ "${TWICE:-0}" = 1 ]; then
  log "making the video twice with one loaded model (vidax bench)"
  "$PY" -m vidax_core.cli bench "$CONFIG" "model.checkpoint=$CK" "sampling.num_steps=$STEPS" "${RUN[@]}" ${EXTRA:-} \
    --in-process --skip reference --out "$OUT" --name "$CASE.bench"
  rc=$?
  "$PY" - "$OUT/$CASE.bench.json" <<'EOF_TWICE' >&2
import json, os, sys
if not os.path.exists(sys.argv[1]):
    sys.exit(0)
d = json.load(open(sys.argv[1]))
for row in d.get("rows", [d]):
    m = row.get("vidax", row)
    print({k: m.get(k) for k in ("per_step_s", "second_video_per_step_s", "step_times_s", "second_video_step_times_s",
                                 "encode_s", "second_video_total_s", "second_video_same", "peak_rss_mb")})
EOF_TWICE
  log "done (exit $rc) in $(( $(date +%s) - start )) s"
  exit "$rc"
fi
"$PY" -m vidax_core.cli run "${ARGS[@]}" --dry-run > "$OUT/$CASE.dry.txt" 2>&1 || log "the dry run failed"
grep -E "^  (text encoder|denoiser|vae|host memory|peak)" "$OUT/$CASE.dry.txt" >&2
"$PY" -m vidax_core.cli run "${ARGS[@]}" &
pid=$!
( while kill -0 "$pid" 2>/dev/null; do
    echo "$(( $(date +%s) - start )) $(awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %s ", $1, $2}' /proc/$pid/status 2>/dev/null)"
    sleep 1
  done ) > "$OUT/$CASE.rss.txt" &
wait "$pid"
rc=$?
"$PY" - "$OUT" "$CASE" "$CK" "$rc" "$(( $(date +%s) - start ))" <<'EOF'
import json, os, sys
out, case, ck, rc, wall = sys.argv[1:6]
row = {"case": case, "exit": int(rc), "wall_s": int(wall)}
for name, key in (("random_checkpoint.json", "checkpoint"),):
    p = os.path.join(ck, name)
    row[key] = json.load(open(p)) if os.path.exists(p) else None
p = os.path.join(out, case + ".run.json")
m = json.load(open(p)) if os.path.exists(p) else {}
row["metrics"] = m
rss = []
p = os.path.join(out, case + ".rss.txt")
if os.path.exists(p):
    for line in open(p):
        parts = line.split()
        if "VmRSS:" in parts:
            rss.append(int(parts[parts.index("VmRSS:") + 1]) / 2**20)
row["sampled_peak_rss_gib"] = round(max(rss), 2) if rss else None
p = os.path.join(out, case + ".dry.txt")
row["dry_host_line"] = next((x.strip() for x in open(p) if x.strip().startswith("host memory")), None) \
    if os.path.exists(p) else None
json.dump(row, open(os.path.join(out, case + ".json"), "w"), indent=1)
keys = ["per_step_s", "mfu", "compile_s", "decode_s", "encode_s", "load_s", "total_s", "peak_device_mb",
        "peak_anon_mb", "peak_rss_mb", "matmul_precision", "attention_backend"]
with open(os.path.join(out, case + ".md"), "w") as f:
    f.write(f"| case | exit | wall s | " + " | ".join(keys) + " |\n|" + "---|" * (len(keys) + 3) + "\n")
    f.write(f"| {case} | {rc} | {wall} | " + " | ".join(str(m.get(k, "-")) for k in keys) + " |\n")
print(open(os.path.join(out, case + ".md")).read())
EOF
exit "$rc"
