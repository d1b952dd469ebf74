#!/usr/bin/env bash
# From nothing to a trained ViT: install dependencies, build, fetch MNIST, train seed 001's
# recipe (mnist-seed: 4x4 patches, 8 dims, 2 blocks, 2 heads; Adam 0.005, batch 128,
# 5 epochs; about half a minute on two cores), evaluate it on the test set, write a few
# test digits as PNG files and predict them, then draw where the model looks (the class
# token's attention and attention rollout over those digits) and the training curves. Also
# the Python package: .venv (Debian's python3 with its numpy) gets vitcpp, pip-installed from
# this build, and classifies the same digits from Python (docs/python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/build_env.sh
cmake -S . -B build "${vit_launcher[@]}" -DCMAKE_BUILD_TYPE=Release
# The program and the Python module alone (they share the library's objects): scripts/test.sh
# builds the tests.
cmake --build build -j"$(nproc)" --target vit _vitcpp
[[ -x .venv/bin/python ]] || /usr/bin/python3 -m venv --system-site-packages .venv
VITCPP_CMAKE_BUILD_DIR=build .venv/bin/pip install -q --no-index --no-build-isolation --disable-pip-version-check .
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
echo "the same from Python (.venv/bin/python, docs/python.md):"
.venv/bin/python examples/python/classify.py runs/mnist-seed runs/mnist-seed/digits/*.png
echo "pictures: runs/mnist-seed/attention/*.png (image | attention | overlay), runs/mnist-seed/curves.png"
