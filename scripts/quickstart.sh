#!/usr/bin/env bash
# From nothing to a trained ViT: install dependencies, build, fetch MNIST, train seed 001's
# recipe (mnist-seed: 4x4 patches, 8 dims, 2 blocks, 2 heads; Adam 0.005, batch 128,
# 5 epochs), then evaluate the checkpoint on the test set. About half a minute of
# training on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
scripts/fetch_data.sh mnist
build/vit train --model mnist-seed --data-dir data/mnist --epochs 5 -b 128 --opt adam --lr 5e-3 \
  --sched none --output runs/mnist-seed --log-every 100
build/vit eval --checkpoint runs/mnist-seed/last.safetensors --data-dir data/mnist
