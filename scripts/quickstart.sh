#!/usr/bin/env bash
# From nothing to a trained ViT: install dependencies, build, fetch MNIST, train seed 001's
# recipe (mnist-seed: 4x4 patches, 8 dims, 2 blocks, 2 heads; Adam 0.005, batch 128,
# 5 epochs; about half a minute on two cores), evaluate it on the test set, write a few
# test digits as PNG files and predict them, then draw where the model looks (the class
# token's attention and attention rollout over those digits) and the training curves.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target vit  # the program alone: scripts/test.sh builds the tests
scripts/fetch_data.sh mnist
# vit train never writes over a run: a second quickstart finds this one finished (or
# continues it where an interruption left it)
if [ -e runs/mnist-seed/args.json ]; then
  build/vit train --resume runs/mnist-seed
else
  build/vit train --recipe mnist-seed --data-dir data/mnist --output runs/mnist-seed --log-every 100
fi
build/vit eval --checkpoint runs/mnist-seed/best.safetensors --data-dir data/mnist
build/vit samples --data-dir data/mnist -n 8 --out runs/mnist-seed/digits > /dev/null
echo "predictions for runs/mnist-seed/digits/<index>_<true label>.png:"
build/vit predict --checkpoint runs/mnist-seed/best.safetensors --topk 3 runs/mnist-seed/digits/*.png
build/vit attention --checkpoint runs/mnist-seed/best.safetensors --out runs/mnist-seed/attention \
  runs/mnist-seed/digits/*.png
build/vit attention --checkpoint runs/mnist-seed/best.safetensors --out runs/mnist-seed/attention \
  --method rollout runs/mnist-seed/digits/*.png
build/vit plot --run runs/mnist-seed
echo "pictures: runs/mnist-seed/attention/*.png (image | attention | overlay), runs/mnist-seed/curves.png"
