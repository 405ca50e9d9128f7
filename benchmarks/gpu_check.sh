#!/usr/bin/env bash
# One GPU, at most 8 minutes, one JSON (benchmarks/gpu_check.json): device,
# ResNet-20/56 epoch time with XLA on and off in fp32 and bf16, the fast
# preset's char GPT (6 x 384) tokens/s, the first epochs of both tracks'
# `--preset fast` with a projected total, peak GPU memory.
#
#   bash benchmarks/gpu_check.sh [OUT.json]
#
# Needs the project installed with a GPU build of TensorFlow (the Docker
# image, or `pip install -e ".[gpu]"`); works offline (synthetic images and
# the pydoc corpus). benchmarks/gpu_check.py says what is measured and how.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-benchmarks/gpu_check.json}"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU visible (nvidia-smi -L failed)" >&2
  exit 2
fi
nvidia-smi -L
# 450 s of measurements inside a hard limit of 480 s: a hung step cannot
# overrun the 8 minutes; whatever finished is already in the JSON.
timeout --kill-after=10 480 python benchmarks/gpu_check.py --out "$out" --budget 450
