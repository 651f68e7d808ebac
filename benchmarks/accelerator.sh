#!/usr/bin/env bash
# The first-accelerator-run bench of docs/benchmarks.md: one H200-sized GPU, no network, at most 10 minutes.
#
#   benchmarks/accelerator.sh OUT_DIR [--wheels DIR]      on the accelerator (refuses, exit 2, without one)
#   benchmarks/accelerator.sh OUT_DIR --cpu-check         the same script end to end on CPU at tiny shapes
#
# PYTHON=... picks the interpreter (default python3). --wheels DIR: install the packages the image lacks from
# DIR (made here by benchmarks/fetch_wheels.sh) with pip --no-index, then this checkout (vidax-core + vidax-wan)
# without dependencies.
# Cases, each under its own timeout (a failing case is recorded and the next one runs), all within BUDGET=585 s:
#   attn_480p, attn_720p   Wan2.1-14B width (5120, 40 heads), 81 frames, bf16, 4 (720p: 2) of 40 blocks, batch 2:
#                          cuDNN flash vs XLA vs blockwise attention at the real sequence length (32760 / 75600
#                          video tokens): compile time, call time, TFLOP/s, MFU (vidax bench --random-dit)
#   offload_480p           the same DiT streamed from pinned host memory, chunk 1 and 2: streamed call time,
#                          h2d time per chunk, the same program resident, hidden fraction
#   pipeline_13b           the full Wan2.1-1.3B pipeline (random weights, bf16, 480x832x17, 5 steps) vs
#                          diffusers' WanPipeline on the same GPU (vidax bench --reference diffusers)
#   quant_fusion           8-bit weights (docs/quantization.md): a Wan2.1-14B-width slice (2 blocks, one 480p latent
#                          frame), bf16 vs int8 vs fp8: XLA's compiled temp bytes (does the dequantisation fuse into
#                          the matmul, or copy a block's kernels?) and the forward's call time on random weights
# Results: OUT_DIR/<case>.json + .md, OUT_DIR/accelerator.json (every case, its status and wall time) and
# OUT_DIR/accelerator.md (one table).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: benchmarks/accelerator.sh OUT_DIR [--wheels DIR | --cpu-check]}
shift
CPU=0 WHEELS=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --cpu-check) CPU=1 ;;
    --wheels) WHEELS=${2:?--wheels needs a folder}; shift ;;
    *) echo "error: unknown argument $1 (use --wheels DIR or --cpu-check)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
PY=${PYTHON:-python3}
start=$(date +%s)
log() { echo "[accelerator.sh +$(( $(date +%s) - start ))s] $*" >&2; }

if [ "$CPU" = 0 ]; then
  if ! "$PY" -c 'import jax, sys; sys.exit(0 if jax.default_backend() in ("gpu", "tpu") else 1)' 2>/dev/null; then
    echo "error: JAX sees no accelerator (backend $("$PY" -c 'import jax; print(jax.default_backend())' 2>/dev/null || echo 'missing')): run on a GPU/TPU machine, or pass --cpu-check" >&2
    exit 2
  fi
  if [ -n "$WHEELS" ]; then
    log "installing the missing wheels from $WHEELS (offline) and this checkout"
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" "setuptools>=77" omegaconf antlr4-python3-runtime \
      imageio-ffmpeg diffusers sentencepiece psutil \
      && "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . -e plugins/vidax_wan \
      || { echo "error: offline install from $WHEELS failed (re-run benchmarks/fetch_wheels.sh)" >&2; exit 2; }
  fi
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ "$CPU" = 1 ]; then  # tiny shapes, same cases and code paths
  export JAX_PLATFORMS=cpu
  ARCH=(configs/demo.yaml sampling.num_frames=5)
  SIZE480=(sampling.height=64 sampling.width=64) SIZE720=(sampling.height=64 sampling.width=96)
  BLOCKS=1 BLOCKS720=1 ATTN=xla,blockwise T_ATTN=240 T_OFF=240 T_PIPE=300 REPEATS=1 INPROC=--in-process BUDGET=900
  PIPE=(configs/demo.yaml sampling.height=32 sampling.width=32 sampling.num_frames=1 sampling.num_steps=3
        sampling.max_sequence_length=16)
  QUANT=(--width tiny --blocks 2 --frames 1 --height 8 --width-px 8) T_QUANT=240
else
  CFGS="$OUT/published"
  [ -d "$CFGS/wan2.1-t2v-14b" ] || timeout 120 "$PY" plugins/vidax_wan/scripts/published_config_folders.py "$CFGS" >/dev/null
  ARCH=(model.id=wan2.1-t2v-14b "model.checkpoint=$CFGS/wan2.1-t2v-14b" model.dtype=bfloat16 sampling.num_frames=81)
  SIZE480=(sampling.height=480 sampling.width=832) SIZE720=(sampling.height=720 sampling.width=1280)
  BLOCKS=4 BLOCKS720=2 ATTN=cudnn,blockwise,xla T_ATTN=140 T_OFF=90 T_PIPE=150 REPEATS=2 INPROC=
  CKPT="$OUT/ckpt-wan13b-random"
  [ -d "$CKPT" ] || timeout 90 "$PY" benchmarks/make_random_checkpoint.py "$CKPT" --dtype bfloat16 >/dev/null
  PIPE=(benchmarks/gpu_wan13b.yaml "model.checkpoint=$CKPT")
  QUANT=(--width 14b --blocks 2 --frames 1 --height 60 --width-px 104) T_QUANT=120
fi

STATUS="$OUT/status.tsv"
: > "$STATUS"
BUDGET=${BUDGET:-585}  # seconds of wall time for everything: a case never runs past it
case_run() {  # name timeout command...
  local name=$1 limit=$2 t0 rc left
  shift 2
  left=$(( BUDGET - ($(date +%s) - start) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    log "$name skipped: the 10-minute budget is spent"
    printf '%s\t%s\t%s\n' "$name" 125 0 >> "$STATUS"
    return
  fi
  t0=$(date +%s)
  log "$name (timeout ${limit}s)"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >> "$STATUS"
  [ "$rc" = 0 ] || log "$name failed (exit $rc; 124 = timeout): see $OUT/$name.log"
}
RB=(-m vidax_core.cli bench --random-dit --repeats "$REPEATS" --quiet --out "$OUT")
case_run attn_480p "$T_ATTN" "$PY" "${RB[@]}" --random-blocks "$BLOCKS" --name attn_480p --attention "$ATTN" \
  "${ARCH[@]}" "${SIZE480[@]}"
case_run attn_720p "$T_ATTN" "$PY" "${RB[@]}" --random-blocks "$BLOCKS720" --name attn_720p --attention "$ATTN" \
  "${ARCH[@]}" "${SIZE720[@]}"
case_run offload_480p "$T_OFF" "$PY" "${RB[@]}" --random-blocks "$BLOCKS" --name offload_480p --attention auto \
  --offload 1,2 "${ARCH[@]}" "${SIZE480[@]}"
case_run pipeline_13b "$T_PIPE" "$PY" -m vidax_core.cli bench "${PIPE[@]}" --reference diffusers $INPROC --quiet --out "$OUT" --name pipeline_13b
case_run quant_fusion "$T_QUANT" "$PY" benchmarks/quant_memory_analysis.py "${QUANT[@]}" --time --out "$OUT" \
  --name quant_fusion

"$PY" benchmarks/collect.py "$OUT" "$STATUS" "$(( $(date +%s) - start ))" "$([ "$CPU" = 1 ] && echo cpu-check || echo accelerator)"
log "done: $OUT/accelerator.md"
