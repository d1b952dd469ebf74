#!/usr/bin/python3
"""Reference fixture for vitcpp's color jitter (vit train --color-jitter), by torchvision.

torchvision's ColorJitter applies brightness, contrast and saturation (and hue, which vitcpp
does not do) in a random order, each with a factor drawn from [max(0, 1 - s), 1 + s]. The
draws cannot be reproduced outside torch's generator, so the fixture fixes them: for a few
(order, factors) cases it applies torchvision.transforms.functional's adjust_brightness,
adjust_contrast and adjust_saturation to float32 images in [0, 1] and writes one
safetensors file:

    image3, image1         inputs [3, 5, 7] and [1, 5, 7] (float32 in [0, 1])
    out3.<k>, out1.<k>     case k's output for each
    __metadata__ cases     JSON [{"order": [i, j, l], "factors": [b, c, s]}], 0 brightness,
                           1 contrast, 2 saturation

    /usr/bin/python3 tools/make_augment_fixtures.py [--out tests/fixtures]

The output is deterministic: the same torchvision gives the same bytes.
"""
import argparse
import json
import os

import torch
import torchvision.transforms.functional as TF

from make_fixtures import write_safetensors

CASES = [
    {"order": [0, 1, 2], "factors": [1.3, 0.7, 1.4]},
    {"order": [2, 0, 1], "factors": [0.6, 1.35, 0.0]},
    {"order": [1, 2, 0], "factors": [1.0, 1.6, 0.65]},
    {"order": [0, 2, 1], "factors": [0.0, 0.9, 1.2]},
]


def jitter(img, order, factors):
    ops = [TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation]
    for i in order:
        img = ops[i](img, factors[i])
    return img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    g = torch.Generator().manual_seed(7)
    image3 = torch.rand(3, 5, 7, generator=g, dtype=torch.float32)
    image1 = torch.rand(1, 5, 7, generator=g, dtype=torch.float32)
    tensors = {"image3": image3, "image1": image1}
    for k, c in enumerate(CASES):
        tensors[f"out3.{k}"] = jitter(image3, c["order"], c["factors"])
        tensors[f"out1.{k}"] = jitter(image1, c["order"], c["factors"])
    path = os.path.join(args.out, "color_jitter.safetensors")
    write_safetensors(path, tensors, {"cases": json.dumps(CASES), "torchvision": __import__("torchvision").__version__})
    print("wrote", path)


if __name__ == "__main__":
    main()
