#!/usr/bin/env bash
# Download, on a machine with PyPI access, the wheels the accelerator image lacks, for Python 3.12 manylinux
# x86-64: omegaconf, antlr4-python3-runtime (omegaconf's parser), imageio-ffmpeg, diffusers, and their
# dependencies that the image does not already have (PyYAML, importlib-metadata, zipp), plus what vidax-core
# itself needs beyond the image (sentencepiece, psutil) and setuptools>=77 to install this checkout. The image
# has jax, flax, numpy, torch, transformers (and so regex, requests, filelock), safetensors, tokenizers,
# huggingface_hub, pluggy, imageio (and so Pillow) and tqdm. Then copy DIR to the accelerator machine and run
#   benchmarks/accelerator.sh OUT --wheels DIR
#
#   benchmarks/fetch_wheels.sh DIR
set -euo pipefail
DIR=${1:?usage: benchmarks/fetch_wheels.sh DIR}
mkdir -p "$DIR"
PIP=${PIP:-python3 -m pip}
# antlr4-python3-runtime 4.9.3 ships only as an sdist: build its wheel here (pure Python, any platform).
$PIP wheel --no-deps -w "$DIR" "antlr4-python3-runtime==4.9.3"
$PIP download -d "$DIR" --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform any --no-deps omegaconf PyYAML imageio-ffmpeg "diffusers==0.42.1" importlib-metadata zipp \
  sentencepiece psutil "setuptools>=77"
echo "wheels in $DIR:" && ls "$DIR"
