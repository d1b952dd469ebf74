#!/usr/bin/env bash
# The whole test suite, what CI runs: install dependencies, build with warnings as errors,
# run ctest; then, when given no arguments,
#   - the whole ctest suite again on every other instruction-set path this CPU runs, and on an
#     AVX-512 CPU the unit and fixture tests and the vit program's main job under qemu
#     emulating one without it (scripts/test_isa.sh; VIT_TEST_ISA=0 skips it),
#   - the same tests minus the `slow` label under ASan + UBSan, and on an AVX-512 CPU the unit
#     and fixture tests there on the AVX2 path too (scripts/test_sanitize.sh;
#     VIT_TEST_SANITIZE=0 skips it),
#   - the shared library's build, its installed examples and its exported symbols
#     (scripts/test_shared.sh; VIT_TEST_SHARED=0 skips it),
#   - a 10-second run of every libFuzzer harness (scripts/fuzz.sh; VIT_TEST_FUZZ=0 skips it),
#   - on x86-64, the unit and fixture tests cross-built for aarch64 and run under qemu-user
#     (scripts/test_aarch64.sh; VIT_TEST_AARCH64=0 skips it); on an aarch64 machine the
#     native suite above is that run, and Debian has no arm64-to-arm64 cross compiler.
# Pick a subset with labels: scripts/test.sh -L unit   (or -L fixture, -L cli, -LE slow);
# a subset runs the normal build only. See docs/reliability.md.
# Compiles go through ccache (scripts/build_env.sh). At the end (also after a failure) a table
# says what each stage took: docs/reliability.md keeps the measured ones.
set -euo pipefail
cd "$(dirname "$0")/.."
times=()
failures=build/ctest-failures.log  # scripts/ctest_digest.sh: why tests failed, printed last
rm -f "$failures"
failure_lines() { if [[ -f $failures ]]; then wc -l <"$failures"; else echo 0; fi; }
stage() {  # stage NAME COMMAND...: run it and note its wall time; a failure ends the script
  local name=$1 t0=$SECONDS rc=0 epoch before
  epoch=$(date +%s) before=$(failure_lines)
  shift
  "$@" || rc=$?  # (set -e does not reach into a function called after || )
  times+=("$(printf '%-10s %5d s%s' "$name" $((SECONDS - t0)) "$( ((rc)) && echo "  FAILED (exit $rc)")")")
  if ((rc != 0)) && (($(failure_lines) == before)); then
    # The stage's script did not say why: digest each build folder whose ctest failed in it.
    local dir
    for dir in build build-asan build-shared build-aarch64; do
      local failed=$dir/Testing/Temporary/LastTestsFailed.log
      [[ -f $failed && $(stat -c %Y "$failed") -ge $epoch ]] && scripts/ctest_digest.sh "$dir" "stage $name"
    done
  fi
  ((rc == 0)) || exit "$rc"
}
run_ctest() { (cd build && ctest --output-on-failure -j"$(nproc)" "$@"); }
summary() {
  local rc=$?
  if [[ -s $failures ]]; then
    echo "test.sh: the failed tests and why ($failures; the whole output: Testing/Temporary/LastTest.log):"
    head -n 150 "$failures"
  fi
  ((${#times[@]})) && printf 'test.sh: %s\n' "stage times (${SECONDS} s in all, exit ${rc}):" "${times[@]}"
}
trap summary EXIT
stage setup scripts/setup.sh
source scripts/build_env.sh
cmake -S . -B build "${vit_launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DVIT_WERROR=ON
stage build cmake --build build -j"$(nproc)"
stage ctest run_ctest "$@"
if (($# == 0)); then
  [[ "${VIT_TEST_ISA:-1}" == 0 ]] || stage isa scripts/test_isa.sh
  [[ "${VIT_TEST_SANITIZE:-1}" == 0 ]] || stage sanitize scripts/test_sanitize.sh
  [[ "${VIT_TEST_SHARED:-1}" == 0 ]] || stage shared scripts/test_shared.sh
  [[ "${VIT_TEST_FUZZ:-1}" == 0 ]] || stage fuzz scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
  [[ "${VIT_TEST_AARCH64:-1}" == 0 || $(uname -m) == aarch64 ]] || stage aarch64 scripts/test_aarch64.sh
fi
