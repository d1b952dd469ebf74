#!/usr/bin/env python3
"""Top-1 of vitcpp's ONNX exports in ONNX Runtime on an IDX test set (MNIST, Fashion-MNIST):
the fp32 graph and the int8 one (`vit export --format onnx --dtype int8`, quantize_dynamic's
graph), beside `vit eval --dtype fp32|int8` on the same checkpoint, with how often each int8
model's predictions agree with its fp32 model's.

  /usr/bin/python3 bench/peers/onnx_accuracy.py CHECKPOINT DATA_DIR [--threads N]

Needs the build (build/vit), numpy and node with bench/peers/ort's onnxruntime-node
(scripts/setup.sh installs it); ONNX Runtime runs on one thread (tests/io/ort_logits.mjs). Inputs are preprocessed as vit eval does for IDX files at the
model's size: pixels / 255, then (x - mean) / std.
"""
import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIT = os.path.join(ROOT, "build", "vit")


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def idx_file(data_dir, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    sys.exit(f"onnx_accuracy: no {stem}[.gz] in {data_dir}")


def checkpoint_config(path):
    """The vit_config in a vitcpp checkpoint's safetensors metadata."""
    if os.path.isdir(path):
        path = os.path.join(path, "best.safetensors")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(json.loads(f.read(n))["__metadata__"]["vit_config"])


def vit_eval(checkpoint, data_dir, dtype, threads, tmp):
    preds = os.path.join(tmp, f"pred_{dtype}.csv")
    out = subprocess.run([VIT, "eval", "--checkpoint", checkpoint, "--data-dir", data_dir, "--dtype", dtype,
                          "--threads", str(threads), "--predictions", preds, "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = list(csv.reader(open(preds)))[1:]
    return json.loads(out)["top1"], np.array([int(r[2]) for r in rows])


def ort_predictions(checkpoint, x, dtype, tmp):
    model = os.path.join(tmp, f"model_{dtype}.onnx")
    subprocess.run([VIT, "export", "--checkpoint", checkpoint, "--format", "onnx", "--dtype", dtype, "--out", model],
                   check=True, capture_output=True)
    inp, out = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.f32")
    x.astype(np.float32).tofile(inp)
    subprocess.run(["node", os.path.join(ROOT, "tests", "io", "ort_logits.mjs"), os.path.join(ROOT, "bench", "peers", "ort"),
                    model, inp, ",".join(map(str, x.shape)), out], check=True, capture_output=True)
    return np.fromfile(out, np.float32).reshape(x.shape[0], -1).argmax(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("data_dir")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    cfg = checkpoint_config(a.checkpoint)
    images = read_idx(idx_file(a.data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = read_idx(idx_file(a.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    mean, std = np.float32(cfg["mean"][0]), np.float32(cfg["std"][0])
    x = ((images - mean) / std)[:, None, :, :]
    with tempfile.TemporaryDirectory() as tmp:
        rows = {}
        for dtype in ("fp32", "int8"):
            top1, pred = vit_eval(a.checkpoint, a.data_dir, dtype, a.threads, tmp)
            rows[("vitcpp", dtype)] = (top1, pred)
            pred = ort_predictions(a.checkpoint, x, dtype, tmp)
            rows[("ONNX Runtime", dtype)] = (100.0 * float((pred == labels).mean()), pred)
    print(f"{a.checkpoint} on {a.data_dir} ({len(labels)} test images)")
    print("| engine | fp32 top-1 | int8 top-1 | int8 - fp32 | int8 agrees with fp32 |")
    print("|---|---|---|---|---|")
    for engine in ("vitcpp", "ONNX Runtime"):
        (f, pf), (q, pq) = rows[(engine, "fp32")], rows[(engine, "int8")]
        print(f"| {engine} | {f:.2f}% | {q:.2f}% | {q - f:+.2f} | {100.0 * float((pf == pq).mean()):.2f}% |")


if __name__ == "__main__":
    main()
