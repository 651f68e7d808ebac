#!/usr/bin/env bash
# Every CPU table of docs/benchmarks.md, regenerated into out/bench/ (run from an environment with the test extra:
# pip install -e '.[test]' and every plugin, as make install-test does). About 10 minutes on an idle 2-core machine; far more under load.
#
#   benchmarks/cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/bench}
export PYTHONPATH="$PWD/testing${PYTHONPATH:+:$PYTHONPATH}"
uptime

# issue 7 items 3 and 4: DiT step vs diffusers (2 blocks at 1.3B width, 1280 tokens, CFG, fp32), compile vs depth,
# VAE decode compile vs frame count
vidax bench --dit-only model.id=wan2.1-t2v-1.3b --out "$OUT"
python benchmarks/cpu_attention.py

# the whole pipeline next to diffusers on the tiny built-in checkpoint (the machinery, not model speed)
vidax bench benchmarks/tiny_cpu.yaml --reference diffusers --out "$OUT"
for family in cosmos cogvideox ltx hunyuan; do
  vidax bench "configs/${family}_demo.yaml" --reference diffusers --out "$OUT" --name "$family"
done

# issue 7 item 5: offload overhead, resident vs streamed at chunk sizes 1, 2 and all of a 4-block model
python benchmarks/make_random_checkpoint.py out/bench/ckpt-wan13b-4blk --layers 4 --small-vae
vidax bench benchmarks/cpu_offload.yaml --sweep offload=off,1,2,all --reference diffusers --out "$OUT"
