#!/usr/bin/env python3
"""How near vitcpp's int8 logits are to its fp32 ones on randomly initialized ViTs (timm's
init, as timm.create_model gives them): the cosine similarity of the two logit vectors per
image and the worst |int8 - fp32| over max |fp32|, on N(0, 1) inputs.

  PYTHONPATH=build/python /usr/bin/python3 bench/int8_cosine.py [--batch 8] [models...]
"""
import argparse

import numpy as np

import vitcpp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=["vit_tiny_patch16_224", "vit_small_patch16_224",
                                                  "vit_base_patch16_224"])
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((a.batch, 3, 224, 224), dtype=np.float32)
    print("| model | cosine, min over images | cosine, mean | worst abs diff / max abs fp32 logit | top-1 agreement |")
    print("|---|---|---|---|---|")
    for name in a.models:
        m = vitcpp.create_model(name)  # random weights, seeded: the same for both dtypes
        fp32 = np.asarray(m(x))
        m._set_dtype("int8")
        int8 = np.asarray(m(x))
        cos = (fp32 * int8).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(int8, axis=1)
        rel = np.abs(int8 - fp32).max() / np.abs(fp32).max()
        agree = (fp32.argmax(1) == int8.argmax(1)).mean() * 100
        print(f"| {name} | {cos.min():.6f} | {cos.mean():.6f} | {rel:.4f} | {agree:.0f}% |")


if __name__ == "__main__":
    main()
