#!/usr/bin/python3
"""The workloads of bench/bench_model.cpp in plain PyTorch, for side-by-side numbers.

A timm-equivalent ViT written by hand (conv patch embedding, class token, learned position
embedding, pre-norm blocks with a fused qkv linear, exact GELU, LayerNorm eps 1e-6, head),
the same presets, inference under torch.no_grad() and a training step (forward,
cross-entropy, backward, AdamW). Warm-up, then the median of repeated runs. A TrainBf16
workload is the training step under torch.autocast("cpu", dtype=torch.bfloat16), the peer
of `vit bench --mode train --dtype bf16` (vit train --amp).

    /usr/bin/python3 bench/peers/torch_reference.py [--threads 2] [--only mnist] [--workload Infer/cifar-seed/b256]
    /usr/bin/python3 bench/peers/torch_reference.py --export-onnx DIR   # the inference workloads as ONNX

--export-onnx writes DIR/<model>_b<batch>.onnx (opset 17, fixed batch, weights as the
model's random init) for ONNX Runtime (bench/peers/ort/ort_bench.mjs) and exits.

Debian's PyTorch is 2-4x faster on these machines with jemalloc that never returns memory,
OpenBLAS's AVX-512 kernels and OMP_WAIT_POLICY=PASSIVE; bench/peers/peers.py runs it so.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "mnist-seed": dict(img=28, chans=1, patch=4, dim=8, depth=2, heads=2, mlp=32, classes=10),
    "mnist-small": dict(img=28, chans=1, patch=4, dim=64, depth=6, heads=4, mlp=128, classes=10),
    "cifar-seed": dict(img=32, chans=3, patch=4, dim=192, depth=12, heads=12, mlp=768, classes=10),
    "vit-tiny-16": dict(img=224, chans=3, patch=16, dim=192, depth=12, heads=3, mlp=768, classes=1000),
    "vit-small-16": dict(img=224, chans=3, patch=16, dim=384, depth=12, heads=6, mlp=1536, classes=1000),
    "vit-base-16": dict(img=224, chans=3, patch=16, dim=768, depth=12, heads=12, mlp=3072, classes=1000),
    # timm's vit_base_patch16_siglip_224 with a head: no class token, the attention pool.
    "siglip-base-16": dict(img=224, chans=3, patch=16, dim=768, depth=12, heads=12, mlp=3072, classes=1000,
                           pool="map"),
}
CASES = [("mnist-seed", 128, False), ("mnist-seed", 128, True), ("mnist-small", 128, True), ("cifar-seed", 256, False),
         ("cifar-seed", 256, True), ("vit-tiny-16", 1, False), ("vit-small-16", 1, False),
         ("vit-base-16", 1, False), ("vit-tiny-16", 16, False), ("vit-small-16", 16, False),
         ("vit-base-16", 16, False), ("vit-base-16", 16, True), ("siglip-base-16", 1, False),
         ("siglip-base-16", 16, False)]


class Block(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, mlp), nn.Linear(mlp, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q * (C // self.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class AttentionPool(nn.Module):
    """timm's AttentionPoolLatent (global_pool='map'): one learned query over the tokens."""

    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.latent = nn.Parameter(torch.randn(1, 1, dim) * dim ** -0.5)
        self.q, self.kv, self.proj = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(dim, mlp), nn.Linear(mlp, dim)

    def forward(self, x):
        B, T, C = x.shape
        q = self.q(self.latent).expand(B, -1, -1).reshape(B, 1, self.heads, C // self.heads).transpose(1, 2)
        k, v = self.kv(x).reshape(B, T, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q * (C // self.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        y = self.proj(a.transpose(1, 2).reshape(B, C))
        return y + self.fc2(F.gelu(self.fc1(self.norm(y))))


class ViT(nn.Module):
    def __init__(self, img, chans, patch, dim, depth, heads, mlp, classes, pool="token"):
        super().__init__()
        n = (img // patch) ** 2
        self.patch_embed = nn.Conv2d(chans, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "token" else None
        self.pos_embed = nn.Parameter(torch.randn(1, n + (pool == "token"), dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, classes)
        self.attn_pool = AttentionPool(dim, heads, mlp) if pool == "map" else None

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        x = self.norm(self.blocks(x + self.pos_embed))
        return self.head(self.attn_pool(x) if self.attn_pool is not None else x[:, 0])


def measure(fn, reps, min_seconds=2.0, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    while len(times) < reps or sum(times) < min_seconds and len(times) < 50:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def export_onnx(out_dir, only):
    import os
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    for name, B, train in CASES:
        if train or only not in name:
            continue
        cfg = PRESETS[name]
        model = ViT(**cfg).eval()
        x = torch.randn(B, cfg["chans"], cfg["img"], cfg["img"])
        path = os.path.join(out_dir, f"{name}_b{B}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, x, path, input_names=["x"], output_names=["logits"], opset_version=17)
        print(json.dumps({"onnx": path, "shape": list(x.shape)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="workloads whose model name contains this")
    ap.add_argument("--workload", default="",
                    help="one workload, e.g. Train/mnist-seed/b128 (any batch; TrainBf16 for autocast; InferInt8 "
                         "for torch.ao.quantization.quantize_dynamic of the blocks' Linear layers, per channel)")
    ap.add_argument("--export-onnx", default="", metavar="DIR", help="write the inference workloads as ONNX and exit")
    args = ap.parse_args()
    if args.export_onnx:
        export_onnx(args.export_onnx, args.only)
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = CASES
    amp = int8 = False
    if args.workload:
        kind, name, b = args.workload.split("/")
        cases = [(name, int(b.lstrip("b")), kind in ("Train", "TrainBf16"))]
        amp = kind == "TrainBf16"
        int8 = kind == "InferInt8"
    for name, B, train in cases:
        if args.only not in name:
            continue
        cfg = PRESETS[name]
        model = ViT(**cfg)
        x = torch.randn(B, cfg["chans"], cfg["img"], cfg["img"])
        y = torch.arange(B) % cfg["classes"]
        if train:
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
        else:
            model.eval()
            if int8:  # the blocks' four products, as vitcpp's --dtype int8 (oneDNN's int8 kernels: VNNI where the CPU has it)
                torch.backends.quantized.engine = "onednn"
                model.blocks = torch.ao.quantization.quantize_dynamic(
                    model.blocks, {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig})

            def step():
                with torch.no_grad():
                    model(x)
        times = measure(step, args.reps)
        t = statistics.median(times)
        kind = ("TrainBf16" if amp else "Train") if train else ("InferInt8" if int8 else "Infer")
        print(json.dumps({"workload": f"{kind}/{name}/b{B}", "threads": args.threads, "median_ms": round(t * 1e3, 3),
                          "min_ms": round(min(times) * 1e3, 3), "max_ms": round(max(times) * 1e3, 3),
                          "img_per_s": round(B / t, 2)}), flush=True)


if __name__ == "__main__":
    main()
