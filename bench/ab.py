#!/usr/bin/python3
"""A/B timing of two vit binaries or environments on one workload, alternating A and B for
--rounds rounds so that load from other work hits both alike (the machine is shared).

    bench/ab.py --a "build-base/b/vit" --b "build/vit" -- --model cifar-seed --mode infer -b 256
    bench/ab.py --a "env VIT_ISA=generic build/vit" --b "build/vit" --rounds 5 -- --model mnist-seed ...

    bench/ab.py --a /old/build/vit --b build/vit --rounds 3 --suite

Each run is `vit bench ... --json`; prints each side's median over rounds of the per-run
medians (ms per batch), and B's speed-up over A. --suite runs the seven workloads of
docs/benchmarks.md's A/B tables instead (2 threads, --min-time 1) and ends with a Markdown
table of them.
"""
import argparse
import json
import shlex
import statistics
import subprocess


# The seven workloads: (row name, vit bench flags).
SUITE = [
    ("mnist-seed train, batch 128", "--model mnist-seed --mode train -b 128"),
    ("mnist-seed infer, batch 128", "--model mnist-seed --mode infer -b 128"),
    ("cifar-seed train, batch 256", "--model cifar-seed --mode train -b 256"),
    ("cifar-seed infer, batch 256", "--model cifar-seed --mode infer -b 256"),
    ("ViT-Ti/16 infer, batch 1", "--model vit-tiny-16 --mode infer -b 1"),
    ("ViT-B/16 infer, batch 1", "--model vit-base-16 --mode infer -b 1"),
    ("ViT-B/16 infer, batch 16", "--model vit-base-16 --mode infer -b 16"),
]


def ab(a_cmd, b_cmd, rounds, rest):
    """Alternates A and B `rounds` times on one workload; returns the result's dict."""
    res = {"a": [], "b": []}
    for _ in range(rounds):
        for side, binary in (("a", a_cmd), ("b", b_cmd)):
            cmd = shlex.split(binary) + ["bench", "--json", "--ceiling", "428"] + rest
            j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            res[side].append(j["median_ms"])
    a, b = statistics.median(res["a"]), statistics.median(res["b"])
    return {"workload": " ".join(rest), "a": a_cmd, "b": b_cmd, "a_ms": round(a, 3), "b_ms": round(b, 3),
            "speedup": round(a / b, 3), "a_runs": [round(x, 2) for x in res["a"]],
            "b_runs": [round(x, 2) for x in res["b"]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--suite", action="store_true", help="the seven workloads, then a Markdown table")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    rest = [x for x in args.bench_args if x != "--"]
    if not args.suite:
        print(json.dumps(ab(args.a, args.b, args.rounds, rest)))
        return
    rows = []
    for name, flags in SUITE:
        r = ab(args.a, args.b, args.rounds, flags.split() + ["--threads", "2", "--min-time", "1"] + rest)
        print(json.dumps(r), flush=True)
        rows.append((name, r))
    print("\n| workload | A ms | B ms | A / B | A's rounds | B's rounds |\n| --- | ---: | ---: | ---: | --- | --- |")
    for name, r in rows:
        print(f"| {name} | {r['a_ms']} | {r['b_ms']} | {r['speedup']:.3f}x | "
              f"{', '.join(map(str, r['a_runs']))} | {', '.join(map(str, r['b_runs']))} |")


if __name__ == "__main__":
    main()
