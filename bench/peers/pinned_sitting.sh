#!/usr/bin/env bash
# vitcpp, PyTorch (torch_reference.py's hand-written model) and timm's own VisionTransformer
# (timm_bench.py) one after another per workload, pinned to 2 cores (taskset -c 0,1), for a
# machine with pip's PyTorch and timm (python3 on PATH) where peers.py's Debian setup does not
# apply. Prints, and appends to $OUT/sitting.jsonl (or /tmp), one JSON line per measurement.
#   bench/peers/pinned_sitting.sh            VIT=path/to/vit, VIT_LIBS=its libraries' folder
set -u
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=PASSIVE
V="env LD_LIBRARY_PATH=${VIT_LIBS:-} ${VIT:-build/vit}"
T="taskset -c 0,1"
R=${OUT:-/tmp}/sitting.jsonl
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3"
grep -o 'avx512f\|avx2\|amx_bf16\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)"
$T $V bench --model mnist-seed --mode infer -b 1 --threads 2 --warmup 0 --runs 1 --min-time 0 --json | tail -1 | tee -a "$R"
for w in "infer vit-base-16 1" "train cifar-seed 256" "train mnist-seed 128" "infer vit-tiny-16 1" "infer vit-base-16 16"; do
  set -- $w
  K=$([ "$1" = infer ] && echo Infer || echo Train)
  $T $V bench --model "$2" --mode "$1" -b "$3" --threads 2 --min-time 1 --runs 3 --json | tail -1 | tee -a "$R"
  OMP_NUM_THREADS=2 $T python3 bench/peers/torch_reference.py --threads 2 --workload "$K/$2/b$3" | tail -1 | tee -a "$R"
  OMP_NUM_THREADS=2 $T python3 bench/peers/timm_bench.py --threads 2 --workload "$K/$2/b$3" | tail -1 | tee -a "$R"
done
