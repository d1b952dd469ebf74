#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (CMake option VIT_SANITIZE).
#   scripts/test_sanitize.sh            every test except the `slow` label (ASan costs ~2-3x),
#                                       then on an AVX-512 CPU the unit and fixture tests on the
#                                       AVX2 path
#   scripts/test_sanitize.sh -L unit    any ctest arguments replace the default filter
# Builds in build-asan at -O1 with line tables only (-g1), so reports still carry file:line;
# AddressSanitizer's documentation asks -O1 or higher for reasonable speed. On an Intel Xeon
# (2026-11-26) RelWithDebInfo's -O2 -g made this build about 20 of CI's 52 minutes; -O1 -g1
# builds in 7.5, and the tests below take 80 s instead of 58. Without -Werror: GCC's manual
# warns that sanitizers raise false -Wmaybe-uninitialized warnings (GCC 12 gives them inside
# <regex>); the normal build in scripts/test.sh keeps warnings as errors. Any report fails the
# test: UBSan aborts at the first finding (-fno-sanitize-recover), ASan exits non-zero.
# scripts/test.sh runs this after the normal suite; see docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/build_env.sh
cmake -S . -B build-asan "${vit_launcher[@]}" -DVIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIT_BUILD_BENCH=OFF -DVIT_PYTHON=OFF -DVIT_GRPC=OFF \
  -DVIT_WERROR=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
cmake --build build-asan -j"$(nproc)"
# detect_leaks: on; libgomp's thread pool and oneDNN's JIT caches are process-lifetime and
# freed by the OS, and LSan does not count them (they stay reachable). fontconfig's cache
# (cairo text) and OpenMPI do lose pointers at exit: suppressed by library name below.
# halt_on_error/abort_on_error make a finding fail the test that triggered it.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Passive OpenMP waiting: spinning threads under ASan's slowdown on a busy machine
# make the suite many times slower without finding anything more.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Third-party process-lifetime caches (fontconfig, OpenMPI) are suppressed by name.
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0}"
cd build-asan
if (($# > 0)); then
  exec ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
fi
# `install` builds programs against the installed library, which carries no sanitizer runtime.
ctest --output-on-failure -j"$(nproc)" --timeout 600 -LE 'slow|mpi|install'
# OpenMPI's dlopen'ed plugins leak at exit without a module name LSan could match: the MPI
# tests keep every ASan/UBSan check but leak detection.
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ctest --output-on-failure -j"$(nproc)" --timeout 600 -L mpi
# The passes above run the path this CPU picks. On an AVX-512 CPU that leaves the AVX2 kernels,
# the ones an AVX2-only CPU (AMD Zen 1-3, Intel client chips) runs, unsanitized: run the unit
# and fixture tests again with that path forced (oneDNN held to it too), as scripts/test_isa.sh
# does for the normal build. About 50 s on the 2-core Intel Xeon of 2026-11-27.
best=$(env -u VIT_ISA ./vit info --model mnist-seed | sed -n 's/^isa: \([a-z0-9]*\) .*/\1/p')
if [[ $best == avx512 ]]; then
  echo "test_sanitize: VIT_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2, labels unit and fixture"
  VIT_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ctest --output-on-failure -j"$(nproc)" --timeout 600 -L 'unit|fixture'
fi
