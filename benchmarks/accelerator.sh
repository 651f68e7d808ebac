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
# CONFIGS=DIR: the published Wan2.1-14B folder the random-DiT cases read their architecture from (default
# OUT_DIR/published, written there by vidax bench --write-random-checkpoint --fill zeros: no torch needed).
# CASES=a,b,...: run only these cases (default all); BUDGET=S: wall seconds for everything (default 585);
# ATTN=a,b: the attention backends of the attn cases; REPEATS=N: timed calls after the first (default 2);
# T_ATTN, T_OFF, T_QUANT, T_RDA, T_VAE, T_SPLASH: per-case timeouts in seconds (default 140, 90, 120, 580, 230, 350;
# on a TPU 170, 160, 240 for the first three, so there the cases take several runs of at most 10 minutes:
# CASES=attn_480p,attn_720p, then CASES=offload_480p,quant_fusion, then CASES=random_dit_all, then
# CASES=vae_decode,splash).
# Cases, each under its own timeout (a failing case is recorded and the next one runs), all within BUDGET:
#   attn_480p, attn_720p   Wan2.1-14B width (5120, 40 heads), 81 frames, bf16, 4 (720p: 2) of 40 blocks, batch 2:
#                          the platform's flash kernel (GPU: cuDNN; TPU: Pallas TPU flash attention) vs XLA vs
#                          blockwise attention at the real sequence length (32760 / 75600 video tokens): compile
#                          time, call time, TFLOP/s, MFU (vidax bench --random-dit)
#   offload_480p           the same DiT streamed from pinned host memory, chunk 1 and 2: streamed call time,
#                          h2d time per chunk, the same program resident, hidden fraction
#   pipeline_13b           the full Wan2.1-1.3B pipeline (random weights written with numpy by vidax bench
#                          --write-random-checkpoint, bf16, 480x832x17, 5 steps), on a GPU beside diffusers'
#                          WanPipeline (--reference diffusers), on a TPU vidax alone (no diffusers there)
#   numerics               the same checkpoint, fixed noise, 3 steps at 256x256x9, on the accelerator in float32
#                          and bf16 for each attention backend (TPU: xla, pallas_tpu; GPU: xla, cudnn) against a
#                          float32 run on this host's CPU (a second process, JAX_PLATFORMS=cpu): relative L2 of the
#                          latents within 5e-4 (float32) and 3e-2 (bf16) (benchmarks/numerics.py)
#   quant_fusion           8-bit weights (docs/quantization.md): a Wan2.1-14B-width slice (2 blocks, one 480p latent
#                          frame), bf16 vs int8 vs fp8: XLA's compiled temp bytes (does the dequantisation fuse into
#                          the matmul, or copy a block's kernels?) and the forward's call time on random weights
#   random_dit_all         every family's DiT at its reference size (its default config; the architecture from the
#                          id's published layout, nothing downloaded), RD_BLOCKS (default 1) block(s) of every group,
#                          batch 2, attention auto, one process per model under a timeout: grid, tokens, compile,
#                          call time, TFLOP/s, MFU, device peak (benchmarks/random_dit_all.py; RD_MODELS=a,b picks
#                          the ids). It needs most of a 10-minute command: run it alone, CASES=random_dit_all
#   splash                 the splash attention backend (benchmarks/splash_tune.py, within T_SPLASH): numerics
#                          against the XLA reference at 4096 tokens for every mask kind (plain, text key lengths,
#                          joint with padded text, causal, NABLA blocks, 3-D neighbourhoods; bf16 and float32;
#                          head_dim 128 and 64) with pallas_tpu / blockwise beside it; the block-size sweep per
#                          family sequence that writes OUT/splash_blocks.json (copy it over
#                          src/vidax_core/attention/splash_blocks.json to ship it); each family's attention shape
#                          on splash against pallas_tpu (NABLA and neighbourhoods against blockwise): s, TFLOP/s, MFU
#   vae_decode             the Wan2.1 VAE decode at 480x832x81, float32 (benchmarks/vae_compile.py, within T_VAE):
#                          a fresh process on an empty compilation cache (cold compile, first and warm decodes, the
#                          decode's FLOPs and MFU), a second process on that cache, the tiled 544x960 decode's
#                          program compiled from shapes, and the same untiled with VIDAX_VAE_SCAN_BLOCKS=1; one
#                          table against the goals (cold compile <= 15 s, warm decode <= 4 s, tiled compile <= 30 s)
# Results: OUT_DIR/<case>.json + .md, OUT_DIR/accelerator.json (every case, its status and wall time) and
# OUT_DIR/accelerator.md (one table). The exit status is non-zero when a case failed. PYTHON unset: the project's
# .venv/bin/python where there is one, else python3.
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
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
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
  BLOCKS=1 BLOCKS720=1 OFF_BLOCKS=2 ATTN=xla,blockwise T_ATTN=240 T_OFF=240 T_PIPE=300 REPEATS=1 INPROC=--in-process BUDGET=900
  PIPE=(configs/demo.yaml sampling.height=32 sampling.width=32 sampling.num_frames=1 sampling.num_steps=3
        sampling.max_sequence_length=16)
  QUANT=(--width tiny --blocks 2 --frames 1 --height 8 --width-px 8) T_QUANT=240
  PIPE_REF=(--reference diffusers)
  CKARGS=(--blocks 1) NUMARGS=(--size 32x32x5 --steps 2 --set sampling.max_sequence_length=16)
  NUM_BACKENDS=xla T_NUM=300
  RDA=(--demos --set sampling.max_sequence_length=16 --attention xla) T_RDA=240
  SPLASH=(--cpu-check --repeats 1) T_SPLASH=240
  VAEARGS=(--tiny --size 32x32x5) VAETILED=(--tiny --size 272x480x5) T_VAE=400
else
  CFGS=${CONFIGS:-$OUT/published}
  [ -f "$CFGS/wan2.1-t2v-14b/model_index.json" ] || "$PY" -m vidax_core.cli bench --write-random-checkpoint \
    wan2.1-t2v-14b "$CFGS/wan2.1-t2v-14b" --fill zeros --quiet >/dev/null  # the published layout, weights as holes
  ARCH=(model.id=wan2.1-t2v-14b "model.checkpoint=$CFGS/wan2.1-t2v-14b" model.dtype=bfloat16 sampling.num_frames=81)
  SIZE480=(sampling.height=480 sampling.width=832) SIZE720=(sampling.height=720 sampling.width=1280)
  BLOCKS=4 BLOCKS720=2 T_PIPE=150 REPEATS=${REPEATS:-2} INPROC=
  if [ "$PLATFORM" = tpu ]; then  # caps above the cases' times on a v5e chip (docs/benchmarks.md: 121-135 s)
    ATTN=${ATTN:-pallas_tpu,blockwise,xla} T_ATTN=${T_ATTN:-170} T_OFF=${T_OFF:-160} T_QUANT=${T_QUANT:-240}
    PIPE_REF=()  # diffusers cannot run there: vidax alone, on the writer's checkpoint
    NUM_BACKENDS=${NUM_BACKENDS:-xla,pallas_tpu}
  else
    ATTN=${ATTN:-cudnn,blockwise,xla} T_ATTN=${T_ATTN:-140} T_OFF=${T_OFF:-90} T_QUANT=${T_QUANT:-120}
    PIPE_REF=(--reference diffusers)
    NUM_BACKENDS=${NUM_BACKENDS:-xla,cudnn}
  fi
  QUANT=(--width 14b --blocks 2 --frames 1 --height 60 --width-px 104)
  CKARGS=() NUMARGS=(--size 256x256x9 --steps 3) T_NUM=${T_NUM:-330}
  T_RDA=${T_RDA:-580}
  T_SPLASH=${T_SPLASH:-350} T_VAE=${T_VAE:-230}  # together one 10-minute command: CASES=vae_decode,splash
  SPLASH=() VAEARGS=(--size 480x832x81) VAETILED=(--size 544x960x25)  # splash paces itself by CASE_LIMIT
  RDA=(--blocks "${RD_BLOCKS:-1}" --repeats 1 --attention auto --budget "$(( T_RDA - 15 ))"
       ${RD_MODELS:+--models "$RD_MODELS"})
  CKPT="$OUT/ckpt-wan13b-random"  # the torch-free writer's full-size Wan2.1-1.3B (random weights)
  PIPE=(benchmarks/gpu_wan13b.yaml "model.checkpoint=$CKPT")
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
  CASE_LIMIT=$limit timeout "$limit" "$@" > "$OUT/$name.log" 2>&1  # a case may pace itself by CASE_LIMIT
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >> "$STATUS"
  [ "$rc" = 0 ] || log "$name failed (exit $rc; 124 = timeout): see $OUT/$name.log"
}
RB=(-m vidax_core.cli bench --random-dit --repeats "$REPEATS" --quiet --out "$OUT")
case_run attn_480p "$T_ATTN" "$PY" "${RB[@]}" --random-blocks "$BLOCKS" --name attn_480p --attention "$ATTN" \
  "${ARCH[@]}" "${SIZE480[@]}"
case_run attn_720p "$T_ATTN" "$PY" "${RB[@]}" --random-blocks "$BLOCKS720" --name attn_720p --attention "$ATTN" \
  "${ARCH[@]}" "${SIZE720[@]}"
case_run offload_480p "$T_OFF" "$PY" "${RB[@]}" --random-blocks "${OFF_BLOCKS:-$BLOCKS}" --name offload_480p --attention auto \
  --offload 1,2 "${ARCH[@]}" "${SIZE480[@]}"
write_ckpt() {  # the writer's Wan2.1-1.3B once per OUT (random weights, numpy only: no torch on the accelerator)
  [ -f "$CK/model_index.json" ] || "$PY" -m vidax_core.cli bench --write-random-checkpoint wan2.1-t2v-1.3b "$CK" \
    "${CKARGS[@]}" --quiet
}
CK=${CKPT:-$OUT/ckpt-wan13b-random}
if [ "$CPU" = 0 ] && [[ ",${CASES:-pipeline_13b}," == *",pipeline_13b,"* ]]; then write_ckpt; fi
case_run pipeline_13b "$T_PIPE" "$PY" -m vidax_core.cli bench "${PIPE[@]}" "${PIPE_REF[@]}" \
  $INPROC --quiet --out "$OUT" --name pipeline_13b
numerics() {  # the float32 CPU reference in a process of its own, then every backend x dtype on this machine
  write_ckpt || return 1
  JAX_PLATFORMS=cpu "$PY" benchmarks/numerics.py reference "$CK" "$OUT/numerics" "${NUMARGS[@]}" || return 1
  "$PY" benchmarks/numerics.py compare "$CK" "$OUT/numerics" "${NUMARGS[@]}" --backends "$NUM_BACKENDS"
  local rc=$?
  cp "$OUT/numerics/numerics.json" "$OUT/numerics/numerics.md" "$OUT/" 2>/dev/null
  return $rc
}
export -f numerics write_ckpt
export PY CK OUT NUM_BACKENDS
NUMARGS_STR="${NUMARGS[*]}" CKARGS_STR="${CKARGS[*]}"
export NUMARGS_STR CKARGS_STR
case_run numerics "$T_NUM" bash -c 'NUMARGS=($NUMARGS_STR); CKARGS=($CKARGS_STR); numerics'
case_run quant_fusion "$T_QUANT" "$PY" benchmarks/quant_memory_analysis.py "${QUANT[@]}" --time --out "$OUT" \
  --name quant_fusion
case_run random_dit_all "$T_RDA" "$PY" benchmarks/random_dit_all.py "$OUT" "${RDA[@]}"
vae_decode() {  # cold (fresh process, empty cache), the same cache again, the tiled program, the scanned variant
  local d="$OUT/vae_decode_runs"
  rm -rf "$d" && mkdir -p "$d" || return 1
  "$PY" benchmarks/vae_compile.py "$d/cold.json" --cache "$d/cache" --repeat-warm 2 "${VAEARGS[@]}" || return 1
  "$PY" benchmarks/vae_compile.py "$d/cached.json" --cache "$d/cache" "${VAEARGS[@]}" || return 1
  "$PY" benchmarks/vae_compile.py "$d/tiled_compile.json" --tiled --compile-only "${VAETILED[@]}" || return 1
  VIDAX_VAE_SCAN_BLOCKS=1 "$PY" benchmarks/vae_compile.py "$d/scan_compile.json" --compile-only "${VAEARGS[@]}" \
    || return 1
  "$PY" benchmarks/vae_compile.py --collect "$d" "$OUT/vae_decode"
}
VAEARGS_STR="${VAEARGS[*]}" VAETILED_STR="${VAETILED[*]}"
export -f vae_decode
export VAEARGS_STR VAETILED_STR
case_run vae_decode "$T_VAE" bash -c 'VAEARGS=($VAEARGS_STR); VAETILED=($VAETILED_STR); vae_decode'
case_run splash "$T_SPLASH" "$PY" benchmarks/splash_tune.py "$OUT" "${SPLASH[@]}"

"$PY" benchmarks/collect.py "$OUT" "$STATUS" "$(( $(date +%s) - start ))" "$([ "$CPU" = 1 ] && echo cpu-check || echo accelerator)"
rc=$?
log "done: $OUT/accelerator.md$([ "$rc" = 0 ] || echo " (a case failed: exit $rc)")"
exit "$rc"
