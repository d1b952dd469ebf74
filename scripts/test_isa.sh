#!/usr/bin/env bash
# Every instruction-set path this machine can run, tested here (scripts/test.sh runs this
# after the normal suite, which tests the path the CPU picks by itself):
#   1. the whole ctest suite (every label: unit, fixture, mpi, cli, install, slow) with each
#      other path forced (VIT_ISA=generic, avx2, and avx512 where the CPU has it; the vit
#      program the cli tests start inherits it), oneDNN held to the same instruction set
#      (ONEDNN_MAX_CPU_ISA), so an AVX-512 machine checks the AVX2 and generic kernels as an
#      AVX2 or older machine would run them;
#   2. on x86-64, scripts/check_isa_code.py on the vit program and the libraries: an AVX-512
#      (EVEX) instruction only in vit::cpu::avx512 functions, an AVX or AVX2 (VEX) one only
#      there or in vit::cpu::avx2, and every call into a path's namespace from outside its
#      folder under a test of isa() for that path. This reads every function, reached by a
#      test or not (its --self-test plants each fault first);
#   3. on a CPU with AVX-512, programs run under qemu-x86_64 emulating a Haswell (AVX2 + FMA,
#      no AVX-512), where an AVX-512 instruction that escaped the dispatch stops the program
#      with SIGILL (forcing VIT_ISA cannot show that: the CPU runs whatever it is given):
#      the unit and fixture programs whose tests are short (test_core, test_io, the fixtures,
#      test_data, test_viz), then the main job end to end, the vit program as a user on an
#      AVX2-only CPU runs it (train, eval, samples, predict, attention on a small
#      CIFAR-10-shaped set of random pixels, and a packed batch-1 inference of ViT-Ti/16 cut
#      to 2 blocks), with the path vit picks from the CPUID qemu reports, not a forced one.
#      The programs of long numerical tests (test_ops, test_model, test_train) run there only
#      with VIT_TEST_QEMU_X86=all: on an Intel Xeon they took 38 of this part's 39 minutes
#      (2026-11-26; all of test_isa took 2.5 minutes on an AMD Zen 5, 8176d0a: docs/design.md,
#      "Testing every path", says why), and step 2 covers their code. VIT_TEST_QEMU_X86=0
#      skips this part.
# Needs a configured build/ (scripts/test.sh builds it first).
#   scripts/test_isa.sh                       every part
#   VIT_TEST_QEMU_X86=all scripts/test_isa.sh every program under qemu too
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/vit ]] || { echo "test_isa: build/vit missing: run scripts/test.sh first" >&2; exit 2; }
best=$(env -u VIT_ISA build/vit info --model mnist-seed | sed -n 's/^isa: \([a-z0-9]*\) .*/\1/p')
echo "test_isa: this CPU runs $best"
status=0
for isa in generic avx2 avx512 neon; do
  [[ $isa == "$best" ]] && continue  # the normal suite ran it
  VIT_ISA=$isa build/vit info --model mnist-seed >/dev/null 2>&1 || continue  # not on this CPU
  case $isa in
    generic) onednn=SSE41 ;;
    avx2) onednn=AVX2 ;;
    *) onednn=ALL ;;
  esac
  # serve.test_grpc is left out: gRPC is transport only, on the engine that serve.test_serve
  # runs on every path (20 s a path saved).
  echo "test_isa: VIT_ISA=$isa ONEDNN_MAX_CPU_ISA=$onednn, every label"
  (cd build && VIT_ISA=$isa ONEDNN_MAX_CPU_ISA=$onednn ctest --output-on-failure -j"$(nproc)" -E '^serve\.test_grpc$') ||
    { status=1; scripts/ctest_digest.sh build "isa: VIT_ISA=$isa"; }
done

if [[ $(uname -m) == x86_64 ]]; then
  echo "test_isa: scripts/check_isa_code.py (the machine code and the dispatch, without running them)"
  if ! scripts/check_isa_code.py --self-test || ! scripts/check_isa_code.py build/vit build/libvit*.a; then
    echo "test_isa: check_isa_code.py FAILED"
    status=1
  fi
fi

qemu=${VIT_TEST_QEMU_X86:-1}
if [[ $best == avx512 && $qemu != 0 ]]; then
  if ! command -v qemu-x86_64-static >/dev/null; then
    sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq qemu-user-static
  fi
  # Unit and fixture programs (tests/CMakeLists.txt), not the cli ones: those start build/vit
  # as a child, which would run natively.
  programs=(test_core test_io test_pretrained_fixtures test_fixtures test_data test_viz)
  [[ $qemu == all ]] && programs+=(test_ops test_model test_train)
  for t in "${programs[@]}"; do
    echo "test_isa: $t under qemu-x86_64 -cpu Haswell (no AVX-512)"
    if ! (cd build/tests && env -u VIT_ISA qemu-x86_64-static -cpu Haswell ./$t --gtest_brief=1 2>&1 |
          grep -v "TCG doesn't support requested feature"); then
      echo "test_isa: $t FAILED under qemu -cpu Haswell"
      status=1
    fi
  done
  # The int8 kernels on a CPU without AVX-VNNI or AVX-512: the table's pick is plain AVX2's
  # vpmaddubsw product, checked bit for bit against the generic loops (tests/ops/test_int8.cpp).
  echo "test_isa: test_ops' int8 kernels under qemu-x86_64 -cpu Haswell"
  if ! (cd build/tests && env -u VIT_ISA qemu-x86_64-static -cpu Haswell ./test_ops --gtest_brief=1 \
        --gtest_filter='GemmS8.*:Int8Quant.*:LinearInt8.*' 2>&1 | grep -v "TCG doesn't support requested feature"); then
    echo "test_isa: test_ops' int8 kernels FAILED under qemu -cpu Haswell"
    status=1
  fi
  if ! scripts/test_isa_cli_haswell.sh; then
    echo "test_isa: the vit program FAILED under qemu -cpu Haswell"
    status=1
  fi
fi
exit $status
