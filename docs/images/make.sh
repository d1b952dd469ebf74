#!/usr/bin/env bash
# The commands that made the pictures in docs/images (run from the repository root after
# building). The models:
#   MNIST: build/vit train --recipe mnist --data-dir data/mnist --epochs 2 --threads 1 --output /tmp/viz-mnist
#          (87.94% test top-1 after 2 epochs, 2026-12-07, on x86-64 AVX-512: the recipe's
#          warmup has just ended; EMA 91.54%)
#   Fashion-MNIST: a 30-epoch run of the recipe of 2026-12-06 (90.47% test top-1; its
#          RandAugment ops have changed since),
#          build/vit train --recipe mnist --data-dir data/fashion-mnist --hflip 0.5 --epochs 30 \
#            --threads 1 --seed 42 --output /work/runs/fmnist-b
set -euo pipefail
MNIST=${MNIST:-/tmp/viz-mnist}
FMNIST=${FMNIST:-/work/runs/fmnist-b}
LABELS=docs/images/fashion-mnist.labels.txt
S=$(mktemp -d)
build/vit samples --data-dir data/mnist -n 1 --out "$S/mnist"             # 0_7.png: a 7
build/vit samples --data-dir data/fashion-mnist -n 2 --out "$S/fmnist"    # 0_9.png: an ankle boot, 1_2.png: a pullover

build/vit attention --checkpoint "$MNIST/best.safetensors" --out docs/images/mnist "$S/mnist/0_7.png"
build/vit attention --method rollout --checkpoint "$MNIST/best.safetensors" --out docs/images/mnist "$S/mnist/0_7.png"
build/vit eval --checkpoint "$MNIST/best.safetensors" --data-dir data/mnist --confusion-png docs/images/mnist/confusion.png

build/vit attention --checkpoint "$FMNIST/best.safetensors" --labels $LABELS --out docs/images/fashion-mnist \
  "$S/fmnist/1_2.png"
build/vit attention --method rollout --checkpoint "$FMNIST/best.safetensors" --labels $LABELS \
  --out docs/images/fashion-mnist "$S/fmnist/1_2.png"
build/vit attention --layer all --checkpoint "$FMNIST/best.safetensors" --labels $LABELS \
  --out docs/images/fashion-mnist "$S/fmnist/0_9.png"
build/vit eval --checkpoint "$FMNIST/best.safetensors" --data-dir data/fashion-mnist --labels $LABELS \
  --confusion-png docs/images/fashion-mnist/confusion.png
build/vit plot --run "$FMNIST" --title "Fashion-MNIST, --recipe mnist --hflip 0.5, 30 epochs" \
  --out docs/images/fashion-mnist/curves.png
build/vit plot --pos-embed --checkpoint "$FMNIST/best.safetensors" \
  --title "Fashion-MNIST model: position-embedding similarity (7x7 patches)" \
  --out docs/images/fashion-mnist/pos-embed.png
rm -rf "$S"
