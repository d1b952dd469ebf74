#!/usr/bin/env bash
# vitcpp next to PyTorch on the same workloads, in one session (the machine is shared and
# noisy: compare ratios from one run, not absolute times across runs).
#   bench/peers.sh [threads]
# PyTorch runs twice: as Debian installs it, and in its best setup here (jemalloc that
# never returns memory, OpenBLAS's AVX-512 kernels). Needs scripts/setup.sh --torch and
# libjemalloc2. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-2}"
out=build/peers
mkdir -p "$out"
VIT_THREADS=$threads build/bench/bench_model --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_format=json > "$out/vitcpp.json"
/usr/bin/python3 bench/torch_reference.py --threads "$threads" > "$out/torch_installed.jsonl"
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [[ -f $jemalloc ]]; then
  LD_PRELOAD=$jemalloc MALLOC_CONF=retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1 OPENBLAS_CORETYPE=SkylakeX \
    /usr/bin/python3 bench/torch_reference.py --threads "$threads" > "$out/torch_best.jsonl"
fi
/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
v = {}
for b in json.load(open(f"{out}/vitcpp.json"))["benchmarks"]:
    if b.get("aggregate_name") == "median":
        v[b["run_name"].split("/real_time")[0].split("/iterations")[0]] = b["img_per_s"]
def load(name):
    p = f"{out}/{name}.jsonl"
    return {j["workload"]: j["img_per_s"] for j in map(json.loads, open(p))} if os.path.exists(p) else {}
ti, tb = load("torch_installed"), load("torch_best")
print(f"{'workload':28} {'vitcpp img/s':>13} {'torch (Debian)':>15} {'torch (best)':>13} {'ratio vs best':>14}")
for w, x in v.items():
    best = tb.get(w) or ti.get(w)
    print(f"{w:28} {x:13.2f} {ti.get(w, float('nan')):15.2f} {tb.get(w, float('nan')):13.2f} {x / best if best else float('nan'):14.2f}")
PY
