#!/usr/bin/python3
"""Trains vit-pytorch's ViT on MNIST in PyTorch and writes it as vit-pytorch users would.

The model is tools/make_vit_pytorch_fixtures.py's copy of vit_pytorch.ViT as the seed has it
(pool='mean' with the class token in the mean, dim_head 32 on a 64-wide model: every way it
differs from timm's ViT). It trains for one
epoch on pixels in [0, 1] (ToTensor(), no normalization), prints its test-set top-1 and its
predictions' checksum, and writes OUT/model.safetensors (the state_dict) and OUT/config.json
(the constructor's arguments). Then `vit eval --checkpoint OUT --data-dir MNIST` reads it:
docs/pretrained.md compares the two.

  /usr/bin/python3 tools/vit_pytorch_mnist.py --data-dir data/mnist --out runs/vit-pytorch-mnist
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from make_fixtures import write_safetensors  # noqa: E402
from make_vit_pytorch_fixtures import ViT  # noqa: E402


def idx(path):
    """An IDX file (raw or .gz) as a numpy array."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            data = (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
            ndim = data[3]
            dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
            return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
    sys.exit(f"{path}: not found")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(0)
    d = args.data_dir
    xtr = torch.from_numpy(idx(f"{d}/train-images-idx3-ubyte").copy()).float().div(255).unsqueeze(1)
    ytr = torch.from_numpy(idx(f"{d}/train-labels-idx1-ubyte").copy()).long()
    xte = torch.from_numpy(idx(f"{d}/t10k-images-idx3-ubyte").copy()).float().div(255).unsqueeze(1)
    yte = torch.from_numpy(idx(f"{d}/t10k-labels-idx1-ubyte").copy()).long()
    kwargs = dict(image_size=28, patch_size=4, num_classes=10, dim=64, depth=4, heads=4, dim_head=32, mlp_dim=128,
                  pool="mean", channels=1)
    model = ViT(**kwargs, version="seed").float()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), 128):
            b = perm[i:i + 128]
            loss = torch.nn.functional.cross_entropy(model(xtr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch + 1}: last loss {loss.item():.4f}, {time.time() - start:.0f} s")
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(xte[i:i + 500]).argmax(-1) for i in range(0, len(xte), 500)])
    top1 = (pred == yte).float().mean().item() * 100
    print(f"PyTorch test top-1: {top1:.2f}% ({int((pred == yte).sum())}/{len(yte)})")
    os.makedirs(args.out, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(args.out, "model.safetensors"), state, {"format": "pt"})
    with open(os.path.join(args.out, "config.json"), "w") as f:
        f.write(json.dumps(kwargs, indent=2) + "\n")
    np.savetxt(os.path.join(args.out, "torch_predictions.txt"), pred.numpy(), fmt="%d")
    print(f"wrote {args.out}/model.safetensors, config.json, torch_predictions.txt")


if __name__ == "__main__":
    main()
