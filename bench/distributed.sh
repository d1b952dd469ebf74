#!/usr/bin/env bash
# Throughput of one process with 2 threads against 2 MPI processes with 1 thread each, on
# the same global batch (docs/distributed.md). Runs alternate (A B A B ...) so that the
# load of a shared machine falls on both alike; prints each run's training images/s (the
# progress line at the last logged step, all ranks together) and the median ratio.
# Synthetic data of each model's input size (the loading cost is not what is compared).
#   bench/distributed.sh [repeats]      (default 3; needs build/vit built with MPI)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
declare -A workloads=(
  [mnist-small]="--model mnist-small -b 128 --crop-pad 2 --smoothing 0.1 --synthetic 6400 --epochs 1 --log-every 50"
  [cifar-seed]="--recipe cifar-seed --synthetic 1024 --epochs 1 --log-every 2"
)
rate() { grep -o '[0-9]* img/s lr' | tail -1 | cut -d' ' -f1; }
for w in mnist-small cifar-seed; do
  a=() b=()
  for ((i = 0; i < reps; i++)); do
    a+=("$(build/vit train ${workloads[$w]} --threads 2 | rate)")
    b+=("$("${mpirun[@]}" build/vit train ${workloads[$w]} --threads 1 | rate)")
  done
  ratios=$(for ((i = 0; i < reps; i++)); do awk -v b="${b[i]}" -v a="${a[i]}" 'BEGIN { printf "%.3f\n", b / a }'; done | sort -n)
  echo "$w: 1x2 threads img/s: ${a[*]} | 2x1 (mpirun) img/s: ${b[*]} | ratios 2x1/1x2: $(echo $ratios) | median $(echo "$ratios" | sed -n "$(((reps + 1) / 2))p")"
done
