#!/usr/bin/env python3
"""timm's own VisionTransformer on the workloads of bench/peers/torch_reference.py.

torch_reference.py writes the model by hand so that Debian's PyTorch 1.13 can run it; where
pip's timm and a current PyTorch are installed, this runs timm's model itself (fused
attention through F.scaled_dot_product_attention, as timm uses it), the peer a user would
compare against. Inference under torch.inference_mode(); a training step is forward,
cross-entropy, backward and AdamW. Prints one JSON line per workload, as torch_reference.py.

    python3 bench/peers/timm_bench.py --threads 2 --workload Infer/vit-base-16/b1
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import PRESETS, measure  # noqa: E402


def timm_model(name):
    from timm.models.vision_transformer import VisionTransformer
    p = PRESETS[name]
    return VisionTransformer(img_size=p["img"], patch_size=p["patch"], in_chans=p["chans"], num_classes=p["classes"],
                             embed_dim=p["dim"], depth=p["depth"], num_heads=p["heads"],
                             mlp_ratio=p["mlp"] / p["dim"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workload", required=True, help="Infer/MODEL/bB or Train/MODEL/bB")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    kind, name, b = a.workload.split("/")
    B, p = int(b[1:]), PRESETS[name]
    torch.manual_seed(0)
    model = timm_model(name)
    x = torch.randn(B, p["chans"], p["img"], p["img"])
    if kind == "Infer":
        model.eval()

        def step():
            with torch.inference_mode():
                model(x)
    else:
        y = torch.randint(0, p["classes"], (B,))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
    times = measure(step, a.reps, min_seconds=1.0, warmup=2)
    print(json.dumps({"workload": a.workload, "peer": "timm", "timm": __import__("timm").__version__,
                      "torch": torch.__version__, "threads": a.threads,
                      "median_ms": 1000 * statistics.median(times), "runs": len(times)}), flush=True)


if __name__ == "__main__":
    main()
