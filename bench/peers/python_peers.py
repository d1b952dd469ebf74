#!/usr/bin/python3
"""vitcpp called from Python next to PyTorch in the same process: ViT-B/16 inference at
batch 1 (model(x) on each side) and cifar-seed training at batch 256 (vitcpp.train on
synthetic images against PyTorch's forward, cross-entropy, backward and AdamW steps).

    PYTHONPATH=build/python /usr/bin/python3 bench/peers/python_peers.py [--threads 2] [--rounds 3]

The two alternate in rounds (vitcpp, PyTorch, vitcpp, ...); each number is the median over
rounds. Inference: the median call of a round. Training: vitcpp's epoch seconds as its
history reports them (the steps, with the data loader, as `vit train` runs them) over
--steps batches, against the same number of PyTorch steps on one fixed batch. PyTorch is
torch_reference.py's timm-equivalent model. Both sides share the process, its allocator
and its OpenMP runtime: the script starts itself again with peers.py's setup for PyTorch
(jemalloc preloaded, OpenBLAS's kernels for this CPU), OpenMP's wait policy left as the
user has it (peers.py's PASSIVE would slow vitcpp, which shares the runtime). Not part of CI.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import vitcpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import PRESETS, ViT  # noqa: E402


def quiet(fn):
    """fn() with the process's stdout (where vitcpp.train prints) sent to /dev/null."""
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        return fn()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def timed_calls(fn, seconds):
    for _ in range(3):
        fn()
    times, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(times) < 5:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def infer_round(model, seconds):
    p = PRESETS[model]
    x = np.random.default_rng(0).standard_normal((1, p["chans"], p["img"], p["img"])).astype(np.float32)
    v = vitcpp.create_model(model)
    t = ViT(**p).eval()
    xt = torch.from_numpy(x)

    def torch_call():
        with torch.no_grad():
            t(xt)

    return timed_calls(lambda: v(x), seconds), timed_calls(torch_call, seconds)


def train_round(model, batch, steps, threads):
    p = PRESETS[model]
    h = quiet(lambda: vitcpp.train(model, synthetic=batch * steps, epochs=1, batch_size=batch, threads=threads,
                                   progress="log", opt="adamw", lr=1e-4))
    v_ms = h[0]["seconds"] / steps * 1e3
    net = ViT(**p).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    x = torch.randn(batch, p["chans"], p["img"], p["img"])
    y = torch.arange(batch) % p["classes"]

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return v_ms, (time.perf_counter() - t0) / steps * 1e3


def with_peers_setup():
    """Runs this script again under peers.py's environment for PyTorch (once)."""
    if os.environ.get("VITCPP_PYTHON_PEERS"):
        return
    import peers
    env = peers.torch_env(1)
    for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS"):
        env.pop(k, None)
        if k in os.environ:
            env[k] = os.environ[k]
    coretype = peers.openblas_best_coretype()
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype[0]
    env["VITCPP_PYTHON_PEERS"] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def main():
    with_peers_setup()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed calls per inference round and side")
    ap.add_argument("--steps", type=int, default=6, help="training steps per round and side")
    a = ap.parse_args()
    vitcpp.set_threads(a.threads)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows = []
    for name, batch, run in [("vit-base-16 infer, batch 1 (model(x))", 1,
                              lambda: infer_round("vit-base-16", a.seconds)),
                             ("cifar-seed train, batch 256 (vitcpp.train)", 256,
                              lambda: train_round("cifar-seed", 256, a.steps, a.threads))]:
        v, t = [], []
        for _ in range(a.rounds):
            vm, tm = run()
            v.append(vm)
            t.append(tm)
            print(f"{name}: vitcpp {vm:.2f} ms, PyTorch {tm:.2f} ms", file=sys.stderr, flush=True)
        rows.append((name, batch, statistics.median(v), statistics.median(t)))
    print(f"\nvitcpp {vitcpp.__version__} and PyTorch {torch.__version__} in one Python process, {a.threads} threads, "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '-')}, "
          f"medians of {a.rounds} alternating rounds; ratio = PyTorch time / vitcpp time\n")
    print("| workload | vitcpp ms/batch | vitcpp img/s | PyTorch ms/batch | vitcpp / PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, b, v_ms, t_ms in rows:
        print(f"| {name} | {v_ms:.2f} | {b / v_ms * 1e3:,.1f} | {t_ms:.2f} | **{t_ms / v_ms:.2f}x** |")


if __name__ == "__main__":
    main()
