#!/usr/bin/env python3
"""Classify image files with any checkpoint vitcpp reads, from Python, as timm users write it:

    python examples/python/classify.py runs/mnist-seed runs/mnist-seed/digits/*.png

The model's own preprocessing (resolve_model_data_config + create_transform) gives the
tensors `vit predict` feeds the model; the top-3 classes print like `vit predict --topk 3`."""
import sys

import numpy as np

import vitcpp


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model = vitcpp.create_model("local-dir:" + sys.argv[1])
    transform = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(model))
    x = np.stack([transform(path) for path in sys.argv[2:]])  # [N, C, H, W] float32
    logits = model(x)  # [N, num_classes]
    print(f"{model!r}: {model.num_params():,} parameters, logits {logits.shape}")
    for path, top in zip(sys.argv[2:], model.predict(x, topk=3)):
        print(path + ": " + ", ".join(f"{label or index} {100 * p:.1f}%" for index, p, label in top))


if __name__ == "__main__":
    main()
