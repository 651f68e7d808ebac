#!/usr/bin/env bash
# The accelerator bench cases of docs/benchmarks.md on a machine with ONE GPU and no network.
#
#   benchmarks/accelerator.sh [WHEEL_OR_DIR ...]
#
# With arguments: creates .venv-bench and installs, offline, every wheel given (a folder means all *.whl in it;
# the folders also serve as --find-links for dependencies), then this checkout (vidax-core + vidax-wan) unless the
# wheels already provided them. Without arguments: uses the Python environment that is active (it needs
# vidax-core, vidax-wan, jax[cuda12], torch, diffusers, transformers).
#
# Cases (random weights at the real Wan2.1-T2V-1.3B shapes: no checkpoint download is needed), each bounded by a
# timeout (caps: 180 + 60 + 150 + 120 s after the install) so the whole script stays under 8 minutes on an H200:
#   1. vidax bench --dit-only         DiT step vidax vs diffusers (30 blocks), compile vs depth, VAE compile vs frames
#   2. vidax bench gpu_wan13b.yaml --reference diffusers     full pipeline vs WanPipeline, bf16, 480x832x17, 5 steps
#   3. vidax bench gpu_wan13b.yaml --sweep offload=off,1,2,all   offload overhead (warm compilation cache)
# Tables: out/bench/*.md, all of them together in out/bench/accelerator.md (JSON beside each).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/bench}
CKPT=${CKPT:-out/bench/ckpt-wan13b-random}
mkdir -p "$OUT"
start=$(date +%s)
log() { echo "[accelerator.sh +$(( $(date +%s) - start ))s] $*" >&2; }

if [ "$#" -gt 0 ]; then
  log "installing wheels offline into .venv-bench"
  python3 -m venv .venv-bench && . .venv-bench/bin/activate
  links=() wheels=()
  for a in "$@"; do
    if [ -d "$a" ]; then links+=(--find-links "$a"); wheels+=("$a"/*.whl)
    else links+=(--find-links "$(dirname "$a")"); wheels+=("$a"); fi
  done
  python -m pip install -q --no-index "${links[@]}" "${wheels[@]}" || { log "wheel install failed"; exit 1; }
  if ! python -c "import vidax_core, vidax_wan" 2>/dev/null; then
    python -m pip install -q --no-index --no-build-isolation "${links[@]}" -e . -e plugins/vidax_wan \
      || { log "installing this checkout failed (carry setuptools as a wheel, or vidax wheels)"; exit 1; }
  fi
fi
python -c "import vidax_core, vidax_wan, torch, diffusers, jax; print('jax', jax.__version__, jax.devices())" \
  || { log "the environment lacks vidax/torch/diffusers/jax"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>/dev/null || true

# 1. DiT-only microbenchmarks (one process: JAX must not grab 75% of the GPU before torch runs)
log "1/3 dit-only"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 180 vidax bench --dit-only model.id=wan2.1-t2v-1.3b --blocks 30 --repeats 5 \
  --vae-size 256 --vae-frames 5,33 --out "$OUT" --name gpu_dit_step || log "dit-only failed or timed out"

# 2. full pipeline vs diffusers on a random-weight 1.3B-shaped checkpoint (cold compile: fresh cache)
log "making the random checkpoint $CKPT"
timeout 60 python benchmarks/make_random_checkpoint.py "$CKPT" || log "checkpoint creation failed"
rm -rf "$OUT/jaxcache"
CACHE=(runtime.compilation_cache=true "runtime.compilation_cache_dir=$PWD/$OUT/jaxcache")
log "2/3 pipeline vs diffusers"
timeout 150 vidax bench benchmarks/gpu_wan13b.yaml "model.checkpoint=$CKPT" "${CACHE[@]}" \
  --reference diffusers --out "$OUT" --name gpu_wan13b_vs_diffusers || log "pipeline bench failed or timed out"

# 3. offload overhead: resident vs streamed blocks at chunk sizes 1, 2 and all 30 (compiles reuse the cache)
log "3/3 offload sweep"
timeout 120 vidax bench benchmarks/gpu_wan13b.yaml "model.checkpoint=$CKPT" "${CACHE[@]}" \
  --sweep offload=off,1,2,all --out "$OUT" --name gpu_wan13b_offload || log "offload sweep failed or timed out"

{
  echo "# vidax accelerator benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), GPU: $(cat "$OUT/gpu.txt" 2>/dev/null))"
  for f in gpu_dit_step gpu_wan13b_vs_diffusers gpu_wan13b_offload; do
    echo; echo "## $f"; echo
    cat "$OUT/$f.md" 2>/dev/null || echo "(not produced: see the log above)"
  done
} > "$OUT/accelerator.md"
log "done: $OUT/accelerator.md"
