#!/usr/bin/python3
"""vitcpp next to PyTorch and ONNX Runtime on the issue's workloads, in one sitting, one table of ratios.

    /usr/bin/python3 bench/peers/peers.py [--threads 2] [--rounds 3] [--only cifar] [--markdown]

For each workload the peers run alternately (vitcpp, PyTorch, vitcpp, PyTorch, ... for
--rounds rounds) so that load from other work on the machine hits both alike; each number
is the median over rounds of each run's median time per batch.

PyTorch (Debian's python3-torch via /usr/bin/python3) runs in its best setup on this
machine: jemalloc that never returns memory (libjemalloc2), OpenBLAS's AVX-512 kernels
(OPENBLAS_CORETYPE=SkylakeX), OMP_WAIT_POLICY=PASSIVE, torch.set_num_threads. On the small
models it is run on 1 thread too and its better thread count is kept (it is faster on one
thread there). vitcpp is `build/vit bench --json` with --threads. Needs a Release build
(build/vit) and `scripts/setup.sh --torch`. Not part of CI; results also go to
build/peers/results.jsonl.

ONNX Runtime (inference workloads only) runs when its npm package is installed:
`(cd bench/peers/ort && npm install --ignore-scripts)`; the models are exported from the
same PyTorch modules to build/peers/onnx (torch_reference.py --export-onnx) on first use and
timed by bench/peers/ort/ort_bench.mjs with Node.js, at --threads and, on the small models,
also on 1 thread (the better is kept). --no-ort leaves it out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

# (mode, model, batch, small[, threads]): small models also try the peers on 1 thread; a
# fifth field runs every side on that many threads instead of --threads (the issue's
# one-thread batch-1 row).
WORKLOADS = [
    ("train", "mnist-seed", 128, True),
    ("infer", "mnist-seed", 128, True),
    ("train", "cifar-seed", 256, False),
    ("infer", "cifar-seed", 256, False),
    ("infer", "vit-tiny-16", 1, True),
    ("infer", "vit-small-16", 1, False),
    ("infer", "vit-base-16", 1, False),
    ("infer", "vit-base-16", 16, False),
    ("train", "vit-base-16", 16, False),
    ("infer", "vit-tiny-16", 1, False, 1),
    ("infer", "vit-small-16", 1, False, 1),
    ("infer", "vit-base-16", 1, False, 1),
    # vitcpp's bf16 inference (--dtype bf16) against the peers' fp32: the issue's 2x ONNX Runtime.
    ("infer-bf16", "vit-base-16", 1, False),
    # Mixed precision (vit train --amp) against torch.autocast(dtype=bfloat16): not an issue target.
    ("train-bf16", "cifar-seed", 256, False),
    ("train-bf16", "vit-base-16", 16, False),
]


def torch_env(threads):
    env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX", OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
    if os.path.exists(JEMALLOC):
        env["LD_PRELOAD"] = JEMALLOC
        env["MALLOC_CONF"] = "retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1"
    return env


# The machine's best measured fp32 matrix-product rate on 2 threads (docs/benchmarks.md).
CEILING = 428.0


def measured_ceiling(threads):
    """The engine's sgemm rate on ViT-B/16's fc1 shape now (vit bench's own measurement)."""
    j = run_json([os.path.join(ROOT, "build/vit"), "bench", "--model", "mnist-seed", "--mode", "infer", "-b", "1",
                  "--threads", str(threads), "--warmup", "0", "--runs", "1", "--min-time", "0", "--json"])
    return j["ceiling_gflops"]


def run_json(cmd, env=None):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def vitcpp(mode, model, batch, threads, min_time):
    dtype = "bf16" if mode.endswith("-bf16") else "fp32"
    j = run_json([os.path.join(ROOT, "build/vit"), "bench", "--model", model, "--mode", mode.split("-")[0], "-b",
                  str(batch), "--dtype", dtype, "--threads", str(threads), "--min-time", str(min_time), "--runs", "3",
                  "--ceiling", str(CEILING), "--json"])
    return j["median_ms"], j


def torch(mode, model, batch, threads):
    kind = {"train": "Train", "train-bf16": "TrainBf16"}.get(mode, "Infer")
    j = run_json(["/usr/bin/python3", os.path.join(ROOT, "bench/peers/torch_reference.py"), "--threads", str(threads),
                  "--workload", f"{kind}/{model}/b{batch}"], env=torch_env(threads))
    return j["median_ms"], j


ORT_DIR = os.path.join(ROOT, "bench/peers/ort")
ONNX_DIR = os.path.join(ROOT, "build/peers/onnx")


def ort_available():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules/onnxruntime-node"))


def ort(model, batch, threads, min_time):
    path = os.path.join(ONNX_DIR, f"{model}_b{batch}.onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench/peers/torch_reference.py"), "--export-onnx",
                        ONNX_DIR, "--only", model], check=True, capture_output=True, cwd=ROOT)
    cfg = {"mnist-seed": (1, 28), "cifar-seed": (3, 32)}.get(model, (3, 224))
    j = run_json(["node", os.path.join(ORT_DIR, "ort_bench.mjs"), path, "--shape", f"{batch},{cfg[0]},{cfg[1]},{cfg[1]}",
                  "--threads", str(threads), "--min-time", str(min_time)])
    return j["median_ms"], j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds of timed runs per vitcpp measurement")
    ap.add_argument("--only", default="", help="workloads whose model name contains this")
    ap.add_argument("--no-ort", action="store_true", help="leave ONNX Runtime out")
    ap.add_argument("--skip", default="", help="skip workloads whose 'model mode bB' contains any of these comma-separated strings")
    args = ap.parse_args()
    os.makedirs(os.path.join(ROOT, "build/peers"), exist_ok=True)
    log = open(os.path.join(ROOT, "build/peers/results.jsonl"), "w")
    rows = []
    use_ort = not args.no_ort and ort_available()
    ceilings = [measured_ceiling(args.threads)]
    for mode, model, batch, small, *fixed in WORKLOADS:
        threads = fixed[0] if fixed else args.threads
        skip = [x for x in args.skip.split(",") if x]
        name = f"{model} {mode}, batch {batch}" + (f", {threads} thread{'s' if threads > 1 else ''}" if fixed else "")
        if args.only not in model or any(x in f"{model} {mode} b{batch}" + (f" t{threads}" if fixed else "") for x in skip):
            continue
        peer_threads = sorted({1, threads}) if small else [threads]
        v, t, o = [], {n: [] for n in peer_threads}, {n: [] for n in peer_threads}
        gflop = 0.0  # per batch, as vit bench counts it (per image; a training step's is 3x the forward's)
        for _ in range(args.rounds):
            ms, j = vitcpp(mode, model, batch, threads, args.min_time)
            gflop = j["gflop_per_image"] * batch
            v.append(ms)
            log.write(json.dumps({"peer": "vitcpp", **j}) + "\n")
            for n in peer_threads:
                ms, j = torch(mode, model, batch, n)
                t[n].append(ms)
                log.write(json.dumps({"peer": "torch", **j}) + "\n")
                if use_ort and mode.startswith("infer"):
                    ms, j = ort(model, batch, n, args.min_time)
                    o[n].append(ms)
                    log.write(json.dumps({"peer": "onnxruntime", **j}) + "\n")
            log.flush()
        v_ms = statistics.median(v)
        best_n = min(peer_threads, key=lambda n: statistics.median(t[n]))
        t_ms = statistics.median(t[best_n])
        o_ms, o_n = None, None
        if all(o.values()):
            o_n = min(peer_threads, key=lambda n: statistics.median(o[n]))
            o_ms = statistics.median(o[o_n])
        rows.append((name, batch, v_ms, t_ms, best_n, o_ms, o_n, gflop, threads))
        ort_text = f", ONNX Runtime {o_ms:.2f} ms ({o_n} thr)" if o_ms else ""
        print(f"{rows[-1][0]}: vitcpp {v_ms:.2f} ms, PyTorch {t_ms:.2f} ms ({best_n} thr){ort_text}", file=sys.stderr,
              flush=True)
    ceilings.append(measured_ceiling(args.threads))
    print(f"\n{args.threads} threads for vitcpp unless the workload says; medians of {args.rounds} alternating "
          f"rounds; ratio = peer time / vitcpp time; % of the {CEILING:.0f} GFLOP/s ceiling (half of it on one "
          f"thread) at vitcpp's median, for the model's FLOPs; the sgemm rate measured by vit bench at the "
          f"start and end of this sitting: {ceilings[0]:.0f} and {ceilings[1]:.0f} GFLOP/s\n")
    print("| workload | vitcpp ms/batch | vitcpp img/s | vitcpp % of ceiling | PyTorch best ms/batch (threads) "
          "| vitcpp / PyTorch | ONNX Runtime ms/batch (threads) | vitcpp / ONNX Runtime |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, b, v_ms, t_ms, n, o_ms, o_n, gflop, threads in rows:
        ort_cells = f"{o_ms:.2f} ({o_n}) | **{o_ms / v_ms:.2f}x**" if o_ms else "- | -"
        pct = gflop / (v_ms * 1e-3) / (CEILING * threads / args.threads) * 100
        print(f"| {name} | {v_ms:.2f} | {b / v_ms * 1e3:,.1f} | {pct:.1f}% | {t_ms:.2f} ({n}) | **{t_ms / v_ms:.2f}x** "
              f"| {ort_cells} |")


if __name__ == "__main__":
    main()
