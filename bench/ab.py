#!/usr/bin/python3
"""A/B timing of two vit binaries or environments on one workload, alternating A and B for
--rounds rounds so that load from other work hits both alike (the machine is shared).

    bench/ab.py --a "build-base/b/vit" --b "build/vit" -- --model cifar-seed --mode infer -b 256
    bench/ab.py --a "env VIT_ISA=generic build/vit" --b "build/vit" --rounds 5 -- --model mnist-seed ...

Each run is `vit bench ... --json`; prints each side's median over rounds of the per-run
medians (ms per batch), and B's speed-up over A.
"""
import argparse
import json
import shlex
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    rest = [x for x in args.bench_args if x != "--"]
    res = {"a": [], "b": []}
    for _ in range(args.rounds):
        for side in ("a", "b"):
            cmd = shlex.split(getattr(args, side)) + ["bench", "--json", "--ceiling", "428"] + rest
            j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            res[side].append(j["median_ms"])
    a, b = statistics.median(res["a"]), statistics.median(res["b"])
    print(json.dumps({"workload": " ".join(rest), "a": args.a, "b": args.b, "a_ms": round(a, 3), "b_ms": round(b, 3),
                      "speedup": round(a / b, 3), "a_runs": [round(x, 2) for x in res["a"]],
                      "b_runs": [round(x, 2) for x in res["b"]]}))


if __name__ == "__main__":
    main()
