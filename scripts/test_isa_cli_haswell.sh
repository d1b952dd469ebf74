#!/usr/bin/env bash
# The main job end to end under qemu-x86_64 -cpu Haswell (AVX2 + FMA, no AVX-512), as a user
# on an AVX2-only CPU runs it (scripts/test_isa.sh runs this on an AVX-512 CPU): vit must pick
# the avx2 path from the CPUID qemu reports, and no command may stop on an AVX-512
# instruction (SIGILL) or fail. The data are random pixels in CIFAR-10's binary format
# (64 training and 32 test images); the model is cifar-seed made small (32 dims, 2 blocks,
# 2 heads of 16: the narrow-head attention), and ViT-Ti/16 cut to 2 blocks at batch 1 runs the
# packed small-batch linear (the first block's four products on all 197 token rows, the
# second's on the class token), and --dtype bf16 is refused with the CPU named. 95-117 s on an
# Intel Xeon (2026-11-27); with all 12 blocks it was
# 327 s, the inference alone 209 s: qemu's emulated float operations are slow there
# (docs/design.md, "Testing every path").
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/vit ]] || { echo "test_isa_cli_haswell: build/vit missing: run scripts/test.sh first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data run=$work/run
mkdir -p "$data"
batch() {  # CIFAR-10 records: a label byte (0-9 in turn), then 3072 pixel bytes
  for ((i = 0; i < $2; i++)); do
    printf '%b' "\\x0$((i % 10))"
    head -c 3072 /dev/urandom
  done >"$1"
}
batch "$data/data_batch_1.bin" 64
batch "$data/test_batch.bin" 32
# One thread: on some machines qemu-user does not get past a second thread
# (scripts/test_aarch64.sh probes for that); on one thread this part runs alike everywhere.
# A wait policy set: otherwise vit runs itself again through /proc/self/exe to set its
# own (apps/vit/main.cpp), and that second start would leave qemu and run natively.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
unset VIT_ISA
vit() {
  echo "+ vit $*"
  qemu-x86_64-static -cpu Haswell build/vit "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2)
}
isa=$(vit info --model cifar-seed | sed -n 's/^isa: //p')
[[ $isa == "avx2 (best on this CPU: avx2;"* ]] || { echo "expected the avx2 path, vit info says: isa: $isa" >&2; exit 1; }
small=(--model cifar-seed --embed-dim 32 --depth 2 --num-heads 2 --mlp-dim 64)
vit train "${small[@]}" --data-dir "$data" --epochs 1 -b 16 --output "$run"
vit eval --checkpoint "$run/best.safetensors" --data-dir "$data"
vit samples --data-dir "$data" -n 2 --out "$run/images"
vit predict --checkpoint "$run/best.safetensors" --topk 2 "$run"/images/*.png
vit attention --checkpoint "$run/best.safetensors" --out "$run/attention" "$run"/images/*.png
ls "$run"/attention/*_cls.png >/dev/null
# int8 on AVX2 without VNNI (vpmaddubsw): an int8 checkpoint, evaluated and predicted in int8.
vit quantize --checkpoint "$run/best.safetensors" --out "$run/int8.safetensors"
vit eval --checkpoint "$run/int8.safetensors" --data-dir "$data"
vit predict --checkpoint "$run/best.safetensors" --dtype int8 --topk 2 "$run"/images/*.png
out=$(vit bench --model vit-tiny-16 --depth 2 -b 1 --runs 1 --warmup 0 --min-time 0 --ceiling 100 --json)
echo "$out"
if ! grep -q '"isa":"avx2"' <<<"$out" || ! grep -q '"weights_packed":true' <<<"$out"; then
  echo "vit bench --json: expected isa avx2 and packed weights" >&2
  exit 1
fi
# bf16 needs AVX-512 in oneDNN: on this CPU a clear error naming the CPU (tests/apps/test_cli_isa.cpp
# checks the wording where oneDNN is held below an AVX-512 CPU instead).
if bf16=$(vit bench --model mnist-seed -b 2 --runs 1 --warmup 0 --min-time 0 --ceiling 100 --dtype bf16 2>&1); then
  echo "vit bench --dtype bf16 ran on a CPU without AVX-512: $bf16" >&2
  exit 1
fi
want="vit: error: --dtype bf16: this CPU has no bf16 matrix product (oneDNN needs AVX-512)"
[[ $bf16 == *"$want" ]] || { echo "vit bench --dtype bf16: expected '$want', got: $bf16" >&2; exit 1; }
echo "test_isa_cli_haswell: the main job ran under qemu -cpu Haswell on the avx2 path"
