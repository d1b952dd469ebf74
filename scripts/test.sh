#!/usr/bin/env bash
# The whole test suite, what CI runs: install dependencies, build with warnings as errors,
# run ctest; then, when given no arguments,
#   - the whole ctest suite again on every other instruction-set path this CPU runs, and on an
#     AVX-512 CPU the unit and fixture tests and the vit program's main job under qemu
#     emulating one without it (scripts/test_isa.sh; VIT_TEST_ISA=0 skips it),
#   - the same tests minus the `slow` label under ASan + UBSan, and on an AVX-512 CPU the unit
#     and fixture tests there on the AVX2 path too (scripts/test_sanitize.sh;
#     VIT_TEST_SANITIZE=0 skips it),
#   - a 10-second run of every libFuzzer harness (scripts/fuzz.sh; VIT_TEST_FUZZ=0 skips it),
#   - on x86-64, the unit and fixture tests cross-built for aarch64 and run under qemu-user
#     (scripts/test_aarch64.sh; VIT_TEST_AARCH64=0 skips it); on an aarch64 machine the
#     native suite above is that run, and Debian has no arm64-to-arm64 cross compiler.
# Pick a subset with labels: scripts/test.sh -L unit   (or -L fixture, -L cli, -LE slow);
# a subset runs the normal build only. See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVIT_WERROR=ON
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
if (($# == 0)); then
  [[ "${VIT_TEST_ISA:-1}" == 0 ]] || scripts/test_isa.sh
  [[ "${VIT_TEST_SANITIZE:-1}" == 0 ]] || scripts/test_sanitize.sh
  [[ "${VIT_TEST_FUZZ:-1}" == 0 ]] || scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
  [[ "${VIT_TEST_AARCH64:-1}" == 0 || $(uname -m) == aarch64 ]] || scripts/test_aarch64.sh
fi
