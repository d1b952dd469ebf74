#!/usr/bin/python3
"""vitcpp next to PyTorch and ONNX Runtime on the issue's workloads, in one sitting, one table of ratios.

    /usr/bin/python3 bench/peers/peers.py [--threads 2] [--rounds 3] [--only cifar] [--skip "bf16,t1"]

For each workload the peers run alternately (vitcpp, PyTorch, vitcpp, PyTorch, ... for
--rounds rounds) so that load from other work on the machine hits both alike; each number
is the median over rounds of each run's median time per batch.

PyTorch (Debian's python3-torch via /usr/bin/python3) runs in its best setup on the CPU it
finds: jemalloc that never returns memory (libjemalloc2, found by ldconfig or in this
machine's multiarch directory), OpenBLAS choosing its own kernels for this CPU (a preset
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE is removed; --openblas-coretype sets one, e.g. Haswell
to hold it to AVX2 on an AVX-512 machine; where OpenBLAS names the CPU by an older core than
its instructions allow, as 0.3.21 does newer Xeons, SkylakeX or Haswell by the CPU's flags),
OMP_WAIT_POLICY=PASSIVE, torch.set_num_threads. On the small models it is run on 1 thread
too and its better thread count is kept (it is faster on one thread there). vitcpp is `build/vit bench --json` with --threads; --vit-env runs it
with more environment, e.g. "VIT_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2" for its AVX2 path on an
AVX-512 machine. The % of ceiling is against the sgemm rate vit bench measures at the start
of the sitting (--ceiling gives one instead). Needs a Release build (build/vit) and
`scripts/setup.sh --torch`. Not part of CI; results also go to build/peers/results.jsonl.

ONNX Runtime (inference workloads only; for int8 on vitcpp's own int8 export, which is the graph
quantize_dynamic writes) runs when its npm package is installed:
`(cd bench/peers/ort && npm install --ignore-scripts)`; the models are exported from the
same PyTorch modules to build/peers/onnx (torch_reference.py --export-onnx) on first use and
timed by bench/peers/ort/ort_bench.mjs with Node.js, at --threads and, on the small models,
also on 1 thread (the better is kept). --no-ort leaves it out. --ort-avx2 adds a column for
ONNX Runtime held to its AVX2 kernels on an AVX-512 CPU (a patched copy of its library,
bench/peers/ort/hold_to_avx2.py), the nearest this machine gets to an AVX2-only CPU's peer.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_jemalloc():
    """libjemalloc.so.2 as the dynamic linker knows it, else in this machine's multiarch directory."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "libjemalloc.so.2" in line and "=>" in line:
                return line.split("=>")[1].strip()
    except OSError:
        pass
    arch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    path = f"/usr/lib/{arch}/libjemalloc.so.2"
    return path if arch and os.path.exists(path) else None


JEMALLOC = find_jemalloc()
OPENBLAS_CORETYPE = None  # --openblas-coretype
VIT_ENV = {}  # --vit-env

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
    ("infer", "vit-tiny-16", 16, False),
    ("infer", "vit-small-16", 16, False),
    ("infer", "vit-base-16", 16, False),
    # SigLIP's ViT-B/16 (timm's vit_base_patch16_siglip_224 with a head): the attention pool.
    ("infer", "siglip-base-16", 1, False),
    ("infer", "siglip-base-16", 16, False),
    ("train", "vit-base-16", 16, False),
    ("infer", "vit-tiny-16", 1, False, 1),
    ("infer", "vit-small-16", 1, False, 1),
    ("infer", "vit-base-16", 1, False, 1),
    # vitcpp's bf16 inference (--dtype bf16) against the peers' fp32: the issue's 2x ONNX Runtime.
    ("infer-bf16", "vit-base-16", 1, False),
    # int8 inference (--dtype int8) against PyTorch's quantize_dynamic (per channel, oneDNN) and
    # ONNX Runtime on vitcpp's int8 export (quantize_dynamic's graph: MatMulInteger).
    ("infer-int8", "vit-small-16", 1, False),
    ("infer-int8", "vit-base-16", 1, False),
    ("infer-int8", "vit-base-16", 16, False),
    ("infer-int8", "vit-base-16", 1, False, 1),
    # Mixed precision (vit train --amp) against torch.autocast(dtype=bfloat16): not an issue target.
    ("train-bf16", "cifar-seed", 256, False),
    ("train-bf16", "vit-base-16", 16, False),
]


def openblas_best_coretype():
    """None when OpenBLAS's own detection finds this CPU's kernels; else the core type of the
    newest vector instructions the CPU has. OpenBLAS 0.3.21 (Debian 12) names a CPU it does not
    know by an old core: on the Intel Xeon of 2026-11-26 (family 6, model 207) it said
    "Prescott" (SSE3 kernels): PyTorch took 984 ms on ViT-B/16 batch 1, 248 ms with SkylakeX.
    vitcpp's sgemm comes from oneDNN, which knows the CPU by its features."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode().lower()
    except (OSError, AttributeError):
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    if "avx512f" in flags and "avx512vl" in flags and "avx512bw" in flags and "avx512dq" in flags:
        want, known = "SkylakeX", ("skylakex", "cooperlake", "sapphirerapids")
    elif "avx2" in flags and "fma" in flags:
        want, known = "Haswell", ("haswell", "zen", "skylakex", "cooperlake", "sapphirerapids")
    else:
        return None
    return None if core in known else (want, core)


def torch_env(threads):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # OpenBLAS's own detection picks its best kernels
        env.pop(k, None)
    if OPENBLAS_CORETYPE:
        env["OPENBLAS_CORETYPE"] = OPENBLAS_CORETYPE
    if JEMALLOC:
        env["LD_PRELOAD"] = JEMALLOC
        env["MALLOC_CONF"] = "retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1"
    return env


# The fp32 matrix-product rate the % of ceiling is taken against: --ceiling, else the one
# measured at the start of the sitting.
CEILING = None


def vit_env():
    return dict(os.environ, **VIT_ENV)


def measured_ceiling(threads):
    """The engine's sgemm rate on ViT-B/16's fc1 shape now (vit bench's own measurement), and its isa."""
    j = run_json([os.path.join(ROOT, "build/vit"), "bench", "--model", "mnist-seed", "--mode", "infer", "-b", "1",
                  "--threads", str(threads), "--warmup", "0", "--runs", "1", "--min-time", "0", "--json"], vit_env())
    return j["ceiling_gflops"], j.get("isa", "?")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def run_json(cmd, env=None):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


# Workload names that are not vit presets: the vit bench flags that build them.
VIT_MODEL_ARGS = {"siglip-base-16": ["--model", "vit-base-16", "--pool", "map", "--no-class-token"]}


def vitcpp(mode, model, batch, threads, min_time):
    dtype = mode.split("-")[1] if "-" in mode else "fp32"
    model_args = VIT_MODEL_ARGS.get(model, ["--model", model])
    j = run_json([os.path.join(ROOT, "build/vit"), "bench", *model_args, "--mode", mode.split("-")[0], "-b",
                  str(batch), "--dtype", dtype, "--threads", str(threads), "--min-time", str(min_time), "--runs", "3",
                  "--ceiling", str(CEILING), "--json"], vit_env())
    return j["median_ms"], j


def torch(mode, model, batch, threads):
    kind = {"train": "Train", "train-bf16": "TrainBf16", "infer-int8": "InferInt8"}.get(mode, "Infer")
    j = run_json(["/usr/bin/python3", os.path.join(ROOT, "bench/peers/torch_reference.py"), "--threads", str(threads),
                  "--workload", f"{kind}/{model}/b{batch}"], env=torch_env(threads))
    return j["median_ms"], j


ORT_DIR = os.path.join(ROOT, "bench/peers/ort")
ONNX_DIR = os.path.join(ROOT, "build/peers/onnx")


def ort_available():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules/onnxruntime-node"))


def int8_onnx(model):
    """vitcpp's int8 export (vit export --format onnx --dtype int8) of the preset with the weights
    of one synthetic training step: what quantize_dynamic writes, on the model's own shapes."""
    path = os.path.join(ONNX_DIR, f"{model}_int8.onnx")
    if os.path.exists(path):
        return path
    run_dir = os.path.join(ONNX_DIR, f"{model}_int8_run")
    vit = os.path.join(ROOT, "build/vit")
    if not os.path.exists(os.path.join(run_dir, "best.safetensors")):
        subprocess.run([vit, "train", *VIT_MODEL_ARGS.get(model, ["--model", model]), "--synthetic", "16", "--epochs",
                        "1", "-b", "16", "--output", run_dir], check=True, capture_output=True, cwd=ROOT)
    subprocess.run([vit, "export", "--checkpoint", run_dir, "--format", "onnx", "--dtype", "int8", "--out", path],
                   check=True, capture_output=True, cwd=ROOT)
    return path


def ort(script, model, batch, threads, min_time, int8=False):
    path = int8_onnx(model) if int8 else os.path.join(ONNX_DIR, f"{model}_b{batch}.onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench/peers/torch_reference.py"), "--export-onnx",
                        ONNX_DIR, "--only", model], check=True, capture_output=True, cwd=ROOT)
    cfg = {"mnist-seed": (1, 28), "cifar-seed": (3, 32)}.get(model, (3, 224))
    j = run_json(["node", script, path, "--shape", f"{batch},{cfg[0]},{cfg[1]},{cfg[1]}",
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
    ap.add_argument("--ceiling", type=float, default=0, help="GFLOP/s for the %% of ceiling (default: measured now)")
    ap.add_argument("--openblas-coretype", default="", help="OPENBLAS_CORETYPE for PyTorch (default: OpenBLAS detects)")
    ap.add_argument("--ort-avx2", action="store_true",
                    help="also time ONNX Runtime held to its AVX2 kernels (bench/peers/ort/hold_to_avx2.py)")
    ap.add_argument("--vit-env", default="", help='environment for vitcpp, e.g. "VIT_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2"')
    args = ap.parse_args()
    global CEILING, OPENBLAS_CORETYPE
    OPENBLAS_CORETYPE = args.openblas_coretype or None
    fallback = None if OPENBLAS_CORETYPE else openblas_best_coretype()
    if fallback:  # OpenBLAS did not recognise this CPU: give it the kernels the CPU runs
        OPENBLAS_CORETYPE = fallback[0]
        print(f"OpenBLAS names this CPU {fallback[1]!r}; PyTorch runs with OPENBLAS_CORETYPE={fallback[0]}",
              file=sys.stderr)
    VIT_ENV.update(kv.split("=", 1) for kv in args.vit_env.split())
    os.makedirs(os.path.join(ROOT, "build/peers"), exist_ok=True)
    log = open(os.path.join(ROOT, "build/peers/results.jsonl"), "w")
    rows = []
    # ONNX Runtime's columns: (label, its ort_bench.mjs, its name in results.jsonl)
    orts = [("ONNX Runtime", os.path.join(ORT_DIR, "ort_bench.mjs"), "onnxruntime")] \
        if not args.no_ort and ort_available() else []
    if orts and args.ort_avx2:
        sys.path.insert(0, ORT_DIR)
        import hold_to_avx2
        orts.append(("ONNX Runtime held to AVX2", hold_to_avx2.make(), "onnxruntime-avx2"))
    first, isa = measured_ceiling(args.threads)
    ceilings = [first]
    CEILING = args.ceiling or first
    for mode, model, batch, small, *fixed in WORKLOADS:
        threads = fixed[0] if fixed else args.threads
        skip = [x for x in args.skip.split(",") if x]
        name = f"{model} {mode}, batch {batch}" + (f", {threads} thread{'s' if threads > 1 else ''}" if fixed else "")
        if args.only not in model or any(x in f"{model} {mode} b{batch}" + (f" t{threads}" if fixed else "") for x in skip):
            continue
        peer_threads = sorted({1, threads}) if small else [threads]
        v, t = [], {n: [] for n in peer_threads}
        o = {label: {n: [] for n in peer_threads} for label, *_ in orts}
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
                for label, script, peer in orts if mode.startswith("infer") else []:
                    ms, j = ort(script, model, batch, n, args.min_time, int8=mode == "infer-int8")
                    o[label][n].append(ms)
                    log.write(json.dumps({"peer": peer, **j}) + "\n")
            log.flush()
        v_ms = statistics.median(v)
        best_n = min(peer_threads, key=lambda n: statistics.median(t[n]))
        t_ms = statistics.median(t[best_n])
        ort_best = []  # per ONNX Runtime column: (median ms, its threads, its rounds), or None
        for label, *_ in orts:
            if all(o[label].values()):
                n = min(peer_threads, key=lambda n: statistics.median(o[label][n]))
                ort_best.append((statistics.median(o[label][n]), n, o[label][n]))
            else:
                ort_best.append(None)
        rows.append((name, batch, v_ms, t_ms, best_n, ort_best, gflop, threads))
        # Each round's time beside the median: a machine in a slow period shows as a round apart
        # (ONNX Runtime slows more than vitcpp there; docs/benchmarks.md).
        def rounds(xs):
            return "[" + ", ".join(f"{x:.2f}" for x in xs) + "]"
        ort_text = "".join(f", {label} {b[0]:.2f} ms {rounds(b[2])} ({b[1]} thr)"
                           for (label, *_), b in zip(orts, ort_best) if b)
        print(f"{rows[-1][0]}: vitcpp {v_ms:.2f} ms {rounds(v)}, PyTorch {t_ms:.2f} ms {rounds(t[best_n])} "
              f"({best_n} thr){ort_text}", file=sys.stderr, flush=True)
    ceilings.append(measured_ceiling(args.threads)[0])
    blas = OPENBLAS_CORETYPE or "its own choice"
    if fallback:
        blas += f" (its own choice, {fallback[1]}, predates this CPU)"
    print(f"\n{cpu_name()}; vitcpp's isa: {isa}{' (' + args.vit_env + ')' if args.vit_env else ''}; PyTorch's "
          f"OpenBLAS: {blas}, jemalloc: {JEMALLOC or 'not found'}")
    print(f"\n{args.threads} threads for vitcpp unless the workload says; medians of {args.rounds} alternating "
          f"rounds; ratio = peer time / vitcpp time; % of the {CEILING:.0f} GFLOP/s ceiling (half of it on one "
          f"thread) at vitcpp's median, for the model's FLOPs; the sgemm rate measured by vit bench at the "
          f"start and end of this sitting: {ceilings[0]:.0f} and {ceilings[1]:.0f} GFLOP/s\n")
    print("| workload | vitcpp ms/batch | vitcpp img/s | vitcpp % of ceiling | PyTorch best ms/batch (threads) "
          "| vitcpp / PyTorch |" + "".join(f" {label} ms/batch (threads) | vitcpp / {label} |"
                                           for label, *_ in orts or [("ONNX Runtime",)]))
    print("| --- | ---: | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * max(len(orts), 1))
    for name, b, v_ms, t_ms, n, ort_best, gflop, threads in rows:
        ort_cells = " | ".join(f"{ob[0]:.2f} ({ob[1]}) | **{ob[0] / v_ms:.2f}x**" if ob else "- | -"
                               for ob in ort_best or [None])
        pct = gflop / (v_ms * 1e-3) / (CEILING * threads / args.threads) * 100
        print(f"| {name} | {v_ms:.2f} | {b / v_ms * 1e3:,.1f} | {pct:.1f}% | {t_ms:.2f} ({n}) | **{t_ms / v_ms:.2f}x** "
              f"| {ort_cells} |")


if __name__ == "__main__":
    main()
