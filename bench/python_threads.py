#!/usr/bin/python3
"""One model called from a pool of Python threads (a threaded web server's pattern) against
the same calls from one thread: time per call, each in a process of its own, alternating
rounds, medians.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_threads.py [--model vit-tiny-16] [--callers 4]

Also the same callers handing each call to one thread that loaded and owns the model
(docs/python.md's advice). libgomp keeps a pool of OpenMP threads per thread that starts
parallel regions; with more pool threads in the process than CPUs it stops spinning between
regions and sleeps instead, so each region costs wake-ups.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def measure(model, callers, calls, via_one):
    """ms a call: `calls` calls from `callers` threads (1: the main thread alone). via_one: each
    caller hands its call to one thread that owns the model (and loaded it), as docs/python.md
    suggests for threaded servers."""
    import numpy as np
    import vitcpp
    owner = ThreadPoolExecutor(1)
    m = owner.submit(vitcpp.create_model, model).result() if via_one else vitcpp.create_model(model)
    if via_one:
        model_call, m = m, lambda x: owner.submit(model_call, x).result()
    c, h, w = (model_call if via_one else m).pretrained_cfg["input_size"]
    x = np.random.default_rng(0).standard_normal((1, c, h, w)).astype(np.float32)
    if callers == 1:
        for _ in range(5):
            m(x)
        t = time.perf_counter()
        for _ in range(calls):
            m(x)
        return (time.perf_counter() - t) / calls * 1e3
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(lambda _: m(x), range(2 * callers)))
        t = time.perf_counter()
        list(pool.map(lambda _: m(x), range(calls)))
        return (time.perf_counter() - t) / calls * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="vit-tiny-16")
    ap.add_argument("--callers", type=int, default=4)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # a child: callers
    ap.add_argument("--via-one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        print(measure(a.model, a.measure, a.calls, a.via_one))
        return

    def child(callers, via_one=False):
        out = subprocess.run([sys.executable, __file__, "--model", a.model, "--calls", str(a.calls),
                              "--measure", str(callers)] + (["--via-one"] if via_one else []),
                             capture_output=True, text=True, check=True, env=os.environ)
        return float(out.stdout)

    ratios, via = [], []
    for r in range(a.rounds):
        one, many, owned = child(1), child(a.callers), child(a.callers, True)
        ratios.append(many / one)
        via.append(owned / one)
        print(f"round {r}: one thread {one:.2f} ms a call; {a.callers} threads {many:.2f} ms ({many / one:.3f}x), "
              f"through one owning thread {owned:.2f} ms ({owned / one:.3f}x)")
    print(f"median against one thread: {a.callers} threads {statistics.median(ratios):.3f}x, through one "
          f"owning thread {statistics.median(via):.3f}x (wait policy: "
          f"{os.environ.get('OMP_WAIT_POLICY', 'vitcpp sets ACTIVE, GOMP_SPINCOUNT=2000')})")


if __name__ == "__main__":
    main()
