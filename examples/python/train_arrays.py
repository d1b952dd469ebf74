#!/usr/bin/env python3
"""Train a ViT from scratch on images held in numpy arrays, then evaluate it:

    python examples/python/train_arrays.py data/mnist [--epochs 5] [--output runs/arrays]

The arrays here come from MNIST's IDX files (scripts/fetch_data.sh puts them in data/mnist),
read with numpy alone; any uint8 [N, H, W] or [N, C, H, W] images with integer labels will
do. uint8 pixels are normalized as `vit train` reads IDX files, so this trains the same bits
as `vit train --data-dir data/mnist` with the same options."""
import argparse
import gzip
import os

import numpy as np

import vitcpp


def read_idx(folder, prefix):
    """(images uint8 [N, H, W], labels int64 [N]) from prefix-images-idx3-ubyte[.gz] and
    prefix-labels-idx1-ubyte[.gz]."""
    def raw(name):
        path = os.path.join(folder, name)
        opener = gzip.open if os.path.exists(path + ".gz") else open
        with opener(path + ".gz" if opener is gzip.open else path, "rb") as f:
            return f.read()
    images, labels = raw(f"{prefix}-images-idx3-ubyte"), raw(f"{prefix}-labels-idx1-ubyte")
    n, h, w = (int.from_bytes(images[i:i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(images, np.uint8, offset=16).reshape(n, h, w)
    y = np.frombuffer(labels, np.uint8, offset=8).astype(np.int64)
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", help="a folder with MNIST-style IDX files (train-* and t10k-*)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--output", default=None, help="run directory (checkpoints, summary.csv)")
    args = p.parse_args()
    train, test = read_idx(args.data, "train"), read_idx(args.data, "t10k")
    print(f"train {train[0].shape}, test {test[0].shape}")
    # Option names are vit train's (--batch-size becomes batch_size); the model is a preset name.
    history = vitcpp.train("mnist-seed", train=train, val=test, output=args.output, epochs=args.epochs,
                           batch_size=128, lr=2e-3, progress="log",
                           callback=lambda e: print(f"epoch {e['epoch']}: eval top-1 {e['eval_top1']:.2f}%"))
    model = history.model  # the last epoch's weights, ready to run
    transform = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(model))
    x = np.stack([transform(im) for im in test[0]])
    predicted = np.concatenate([model(x[i:i + 256]).argmax(1) for i in range(0, len(x), 256)])
    print(f"test top-1 {100 * np.mean(predicted == test[1]):.2f}% ({len(x)} images)")


if __name__ == "__main__":
    main()
