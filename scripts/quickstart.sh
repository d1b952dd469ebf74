#!/usr/bin/env bash
# From nothing to a trained ViT: install dependencies, build, train a small ViT on a
# synthetic task and evaluate it every epoch. (MNIST training, evaluation and attention
# maps replace the synthetic demo when the dataset readers land.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
build/vit train --model mnist-seed --synthetic 6000 --epochs 5 -b 128 --opt adam --lr 5e-3 \
  --sched cosine --output runs/quickstart --log-every 0
echo
echo "summary (runs/quickstart/summary.csv):"
column -s, -t runs/quickstart/summary.csv 2>/dev/null || cat runs/quickstart/summary.csv
