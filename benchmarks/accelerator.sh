#!/usr/bin/env bash
# The first-accelerator-run bench of docs/benchmarks.md: one GPU (H200-sized) or one TPU chip (v5e), no network,
# at most 10 minutes.
#
#   benchmarks/accelerator.sh OUT_DIR [--wheels DIR]      on the accelerator (refuses, exit 2, without one)
#   benchmarks/accelerator.sh OUT_DIR --cpu-check         the same script end to end on CPU at tiny shapes
#
# PYTHON=... picks the interpreter (default python3). --wheels DIR: install what the image lacks, offline.
#   GPU: from DIR (made by benchmarks/fetch_wheels.sh) with pip --no-index, then this checkout (vidax-core +
#        vidax-wan) without dependencies.
#   TPU: vidax-core and vidax-wan wheels from DIR (made by benchmarks/tpu_wheels.sh) and their dependencies from
#        the machine's own index (TPU_INDEX, default file:///opt/pypi/simple) plus DIR, with pip --target SITE
#        (default /tmp/vidax-site: commands there run as an ordinary user); SITE goes last on PYTHONPATH so the
#        machine's JAX stays first.
# CONFIGS=DIR: the published config-only folders (plugins/vidax_wan/scripts/published_config_folders.py, which
# needs torch + diffusers: on a TPU make them elsewhere and bring them); default OUT_DIR/published.
# CASES=a,b,...: run only these cases (default all); BUDGET=S: wall seconds for everything (default 585);
# ATTN=a,b: the attention backends of the attn cases; REPEATS=N: timed calls after the first (default 2);
# T_ATTN, T_OFF, T_QUANT: per-case timeouts in seconds (default 140, 90, 120; on a TPU 170, 160, 240, so there
# the cases take two runs of at most 10 minutes: CASES=attn_480p,attn_720p then CASES=offload_480p,quant_fusion).
# Cases, each under its own timeout (a failing case is recorded and the next one runs), all within BUDGET:
#   attn_480p, attn_720p   Wan2.1-14B width (5120, 40 heads), 81 frames, bf16, 4 (720p: 2) of 40 blocks, batch 2:
#                          the platform's flash kernel (GPU: cuDNN; TPU: Pallas TPU flash attention) vs XLA vs
#                          blockwise attention at the real sequence length (32760 / 75600 video tokens): compile
#                          time, call time, TFLOP/s, MFU (vidax bench --random-dit)
#   offload_480p           the same DiT streamed from pinned host memory, chunk 1 and 2: streamed call time,
#                          h2d time per chunk, the same program resident, hidden fraction
#   pipeline_13b           the full Wan2.1-1.3B pipeline (random weights, bf16, 480x832x17, 5 steps) vs
#                          diffusers' WanPipeline on the same GPU (vidax bench --reference diffusers). Skipped on a
#                          TPU: its random checkpoint and the reference need torch + diffusers on the accelerator
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

PLATFORM=cpu
if [ "$CPU" = 0 ]; then
  PLATFORM=$("$PY" -c 'import jax; print(jax.default_backend())' 2>/dev/null || echo missing)
  if [ "$PLATFORM" != gpu ] && [ "$PLATFORM" != tpu ]; then
    echo "error: JAX sees no accelerator (backend $PLATFORM): run on a GPU/TPU machine, or pass --cpu-check" >&2
    exit 2
  fi
  if [ -n "$WHEELS" ] && [ "$PLATFORM" = tpu ]; then
    SITE=${SITE:-/tmp/vidax-site}
    [ -d "$SITE/vidax_core" ] && log "$SITE holds vidax already: not installing again" || {
    log "installing vidax from $WHEELS and its dependencies from ${TPU_INDEX:-file:///opt/pypi/simple} into $SITE"
    PIP=("$PY" -m pip install -q --isolated --disable-pip-version-check --only-binary=:all: --target "$SITE")
    PIP_CONFIG_FILE=/dev/null "${PIP[@]}" --index-url "${TPU_INDEX:-file:///opt/pypi/simple}" --find-links "$WHEELS" \
      "flax>=0.12,<=0.12.8" omegaconf pluggy safetensors huggingface_hub tokenizers sentencepiece jinja2 imageio tqdm psutil pillow \
      ml_dtypes && PIP_CONFIG_FILE=/dev/null "${PIP[@]}" --no-index --no-deps --upgrade "$WHEELS"/vidax_*.whl \
      || { echo "error: installing into $SITE failed (re-run benchmarks/tpu_wheels.sh)" >&2; exit 2; }; }
    export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$SITE
  elif [ -n "$WHEELS" ]; then
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
  CFGS=${CONFIGS:-$OUT/published}
  [ -d "$CFGS/wan2.1-t2v-14b" ] || timeout 120 "$PY" plugins/vidax_wan/scripts/published_config_folders.py "$CFGS" >/dev/null
  ARCH=(model.id=wan2.1-t2v-14b "model.checkpoint=$CFGS/wan2.1-t2v-14b" model.dtype=bfloat16 sampling.num_frames=81)
  SIZE480=(sampling.height=480 sampling.width=832) SIZE720=(sampling.height=720 sampling.width=1280)
  BLOCKS=4 BLOCKS720=2 T_PIPE=150 REPEATS=${REPEATS:-2} INPROC=
  if [ "$PLATFORM" = tpu ]; then  # caps above the cases' times on a v5e chip (docs/benchmarks.md: 121-135 s)
    ATTN=${ATTN:-pallas_tpu,blockwise,xla} T_ATTN=${T_ATTN:-170} T_OFF=${T_OFF:-160} T_QUANT=${T_QUANT:-240}
    NO_PIPE="needs torch + diffusers on the accelerator (the random 1.3B checkpoint, the reference); the TPU image has no diffusers and a CPU-only torch"
  else
    ATTN=${ATTN:-cudnn,blockwise,xla} T_ATTN=${T_ATTN:-140} T_OFF=${T_OFF:-90} T_QUANT=${T_QUANT:-120}
    CKPT="$OUT/ckpt-wan13b-random"
    [ -d "$CKPT" ] || timeout 90 "$PY" benchmarks/make_random_checkpoint.py "$CKPT" --dtype bfloat16 >/dev/null
    PIPE=(benchmarks/gpu_wan13b.yaml "model.checkpoint=$CKPT")
  fi
  QUANT=(--width 14b --blocks 2 --frames 1 --height 60 --width-px 104)
fi

STATUS="$OUT/status.tsv"
: > "$STATUS"
BUDGET=${BUDGET:-585}  # seconds of wall time for everything: a case never runs past it
case_run() {  # name timeout command...
  local name=$1 limit=$2 t0 rc left
  shift 2
  [[ ",${CASES:-$name}," == *",$name,"* ]] || return 0
  left=$(( BUDGET - ($(date +%s) - start) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    log "$name skipped: the 10-minute budget is spent"
    printf '%s\t%s\t%s\t%s\n' "$name" 125 0 "the budget is spent" >> "$STATUS"
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
if [ -n "${NO_PIPE:-}" ]; then
  [[ ",${CASES:-pipeline_13b}," == *",pipeline_13b,"* ]] && printf '%s\t%s\t%s\t%s\n' pipeline_13b - 0 "$NO_PIPE" >> "$STATUS"
else
  case_run pipeline_13b "$T_PIPE" "$PY" -m vidax_core.cli bench "${PIPE[@]}" --reference diffusers $INPROC --quiet \
    --out "$OUT" --name pipeline_13b
fi
case_run quant_fusion "$T_QUANT" "$PY" benchmarks/quant_memory_analysis.py "${QUANT[@]}" --time --out "$OUT" \
  --name quant_fusion

"$PY" benchmarks/collect.py "$OUT" "$STATUS" "$(( $(date +%s) - start ))" "$([ "$CPU" = 1 ] && echo cpu-check || echo accelerator)"
log "done: $OUT/accelerator.md"
