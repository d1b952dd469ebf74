#!/usr/bin/python3
"""What a call from Python costs over the engine: vitcpp's model(x) timed in a Python loop
against `vit bench` on the same model and batch, alternating, in rounds (medians).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call.py [--model vit-tiny-16] [-b 1] [--with-torch]

--with-torch imports PyTorch first, as a process that uses both does (importing it sets
OpenMP's thread count, which vitcpp's own count must not follow).
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import vitcpp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="vit-tiny-16")
    ap.add_argument("-b", "--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--with-torch", action="store_true", help="import PyTorch first")
    ap.add_argument("--vit", default=os.path.join(os.path.dirname(__file__), "..", "build", "vit"))
    a = ap.parse_args()
    if a.with_torch:
        import torch
        print(f"PyTorch {torch.__version__} imported: its threads {torch.get_num_threads()}, "
              f"vitcpp's {vitcpp.get_threads()}")
    m = vitcpp.create_model(a.model)
    c, h, w = m.pretrained_cfg["input_size"]
    x = np.random.default_rng(0).standard_normal((a.batch, c, h, w)).astype(np.float32)
    for _ in range(20):
        m(x)
    ratios = []
    for r in range(a.rounds):
        times, t0 = [], time.perf_counter()
        while time.perf_counter() - t0 < a.seconds:
            t = time.perf_counter()
            m(x)
            times.append((time.perf_counter() - t) * 1e3)
        py = statistics.median(times)
        out = subprocess.run([a.vit, "bench", "--model", a.model, "-b", str(a.batch), "--min-time", str(a.seconds),
                              "--ceiling", "100", "--json"], capture_output=True, text=True, check=True).stdout
        cli = json.loads(out)["median_ms"]
        ratios.append(py / cli)
        print(f"round {r}: python {py:.3f} ms, vit bench {cli:.3f} ms, python / vit bench {py / cli:.3f}")
    print(f"median python / vit bench: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
