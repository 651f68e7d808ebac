#!/usr/bin/env bash
# Make, on a machine with PyPI access, what benchmarks/accelerator.sh --wheels DIR installs on a TPU machine that
# has its own package index but no network: wheels of this checkout (vidax-core, vidax-wan: their entry points are
# how the plugin is found) and of antlr4-python3-runtime 4.9.3 (omegaconf's parser, published only as an sdist);
# every other dependency comes from the TPU machine's index. With CONFIGS=FOLDER, also the published config-only
# folder of Wan2.1-T2V-14B (needs torch + diffusers, which the TPU image lacks): pass CONFIGS=FOLDER there too.
#
#   [CONFIGS=FOLDER] benchmarks/tpu_wheels.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: benchmarks/tpu_wheels.sh DIR}
mkdir -p "$DIR"
PY=${PYTHON:-python3}
"$PY" -m pip wheel -q --no-deps -w "$DIR" . plugins/vidax_wan "antlr4-python3-runtime==4.9.3"
if [ -n "${CONFIGS:-}" ]; then
  tmp=$(mktemp -d)
  "$PY" plugins/vidax_wan/scripts/published_config_folders.py "$tmp" >/dev/null
  mkdir -p "$CONFIGS" && cp -r "$tmp/wan2.1-t2v-14b" "$CONFIGS/" && rm -rf "$tmp"
fi
echo "wheels in $DIR:" && ls "$DIR"
