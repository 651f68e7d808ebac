#!/usr/bin/env bash
# Make, on a machine with PyPI access, what benchmarks/accelerator.sh --wheels DIR installs on a TPU machine that
# has its own package index but no network: wheels of this checkout (vidax-core and every family plugin: their
# entry points are how the plugins are found) and of antlr4-python3-runtime 4.9.3 (omegaconf's parser, published only as an sdist);
# every other dependency comes from the TPU machine's index. (The published architectures the benchmarks need
# there come with the plugins: vidax bench --write-random-checkpoint writes them without torch.)
#
#   benchmarks/tpu_wheels.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: benchmarks/tpu_wheels.sh DIR}
mkdir -p "$DIR"
PY=${PYTHON:-python3}
"$PY" -m pip wheel -q --no-deps -w "$DIR" . plugins/vidax_*/ "antlr4-python3-runtime==4.9.3"
echo "wheels in $DIR:" && ls "$DIR"
