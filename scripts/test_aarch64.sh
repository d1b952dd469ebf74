#!/usr/bin/env bash
# aarch64 (arm64) without an arm64 machine: cross-builds the library, vit and the unit and
# fixture tests into build-aarch64/ with Debian's crossbuild-essential-arm64, and runs those
# tests under qemu-user (ctest's CMAKE_CROSSCOMPILING_EMULATOR, cmake/aarch64-linux-gnu.cmake).
# scripts/test.sh runs it after the native suite (VIT_TEST_AARCH64=0 skips it there).
#
# The arm64 libraries: `apt-get download` of the arm64 packages, unpacked with `dpkg -x` into
# build-aarch64/sysroot (only `dpkg --add-architecture arm64` touches the host). Installing them
# with apt-get instead does not work for all of them: libdnnl-dev:arm64 and libdnnl-dev:amd64
# both ship /usr/include/oneapi/dnnl/dnnl_config.h (different ones) and cannot be installed
# together, and the others pull arm64 copies of libc6 and friends whose versions must match
# the host's amd64 ones. libc, libstdc++ and libgomp come with the cross compiler
# (/usr/aarch64-linux-gnu); nlohmann-json and CLI11 are headers.
#
# Left out of this build (the native suite covers them):
#   - cairo (VIT_CAIRO=OFF: the figures' tests that draw skip; its arm64 -dev package pulls
#     a few dozen more), MPI (VIT_MPI=OFF), ONNX export (VIT_ONNX=OFF: libonnx-dev and
#     protobuf for arm64), the benchmarks, the fuzz harnesses;
#   - the cli, slow and mpi labels (they start vit processes, some several at once);
#   - where qemu-user cannot run a second thread, the tests that start threads of their own.
#     On some of these machines a program under qemu-user that starts a second thread never
#     gets past it (std::thread, OpenMP and oneDNN alike; seen with qemu 7.2 and 10.0), while
#     single-threaded programs run; on others (qemu 7.2.22 on Linux 6.18, 2026-11-25) it
#     works. So one test that starts a std::thread probes qemu first (with a time limit).
#     Where threads run, a scan on one OpenMP thread under qemu's strace first checks that
#     kThreadTests lists every test that starts a thread all the same (clone with
#     CLONE_THREAD); then the tests run on as many threads as the host has CPUs, as the
#     native suite does and as an arm64 machine of that size would (on one thread alone,
#     the shards and the per-thread splits of the kernels stay untested: a difference in
#     the last bits between inference and the training forward on 2 threads went unseen
#     here until scripts/arm64_chroot.sh showed it). Where the probe hangs, everything runs
#     on one OpenMP thread and the tests in kThreadTests are left out: the data
#     prefetcher's worker thread, shards (one thread per shard), and the tests that compare
#     results on 1 and 2 threads (omp_set_num_threads(2)); the native suite runs them all.
# Usage: scripts/test_aarch64.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
scripts/setup.sh --aarch64

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
out=build-aarch64
sysroot="$PWD/$out/sysroot"
# The arm64 packages unpacked into the sysroot. libdnnl2's own dependencies (libc6, libgcc-s1,
# libgomp1, libstdc++6) are the cross compiler's. OpenBLAS's OpenMP build does the matrix
# products on aarch64 (CMake's VIT_SGEMM); its LAPACK part needs libgfortran5.
arm64=(libdnnl-dev:arm64 libdnnl2:arm64 libgtest-dev:arm64 zlib1g-dev:arm64 zlib1g:arm64
       libpng-dev:arm64 libpng16-16:arm64 libjpeg62-turbo-dev:arm64 libjpeg62-turbo:arm64
       libopenblas-openmp-dev:arm64 libopenblas0-openmp:arm64 libgfortran5:arm64
       nlohmann-json3-dev libcli11-dev)
if [[ "$(cat "$sysroot/.packages" 2>/dev/null)" != "${arm64[*]}" ]]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
    $sudo apt-get update -qq
  fi
  rm -rf "$sysroot" "$out/debs"
  mkdir -p "$sysroot" "$out/debs"
  # A list fetched before arm64 was added (or too old for the mirror) has no arm64 packages
  # or stale versions: update once and try again.
  if ! (cd "$out/debs" && apt-get download -qq "${arm64[@]}"); then
    $sudo apt-get update -qq
    (cd "$out/debs" && apt-get download -qq "${arm64[@]}")
  fi
  for deb in "$out"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
  # Merged /usr, as on an installed system: zlib1g puts libz.so.1 in /lib and its -dev
  # package links /usr/lib/.../libz.so there by an absolute path; keep such links inside.
  if [[ -d "$sysroot/lib" ]]; then
    cp -a "$sysroot/lib/." "$sysroot/usr/lib/"
    rm -rf "$sysroot/lib"
  fi
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    target=$(readlink "$link")
    ln -sfr "$sysroot/usr${target#/usr}" "$link"
  done
  # Debian's alternatives (libopenblas.so.0 in the library folder, pointing into the
  # OpenMP build's folder) are made by the packages' scripts, which dpkg -x does not run:
  # link the library the programs load by its soname to the real one.
  ln -sfr "$sysroot/usr/lib/aarch64-linux-gnu/openblas-openmp/libopenblas.so.0" \
    "$sysroot/usr/lib/aarch64-linux-gnu/libopenblas.so.0"
  echo "${arm64[*]}" >"$sysroot/.packages"
fi

# qemu-user: the arm64 loader and libc from the cross compiler's folder, the packages'
# libraries from the sysroot (QEMU_SET_ENV reaches the emulated program only).
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export QEMU_SET_ENV="LD_LIBRARY_PATH=$sysroot/usr/lib/aarch64-linux-gnu"
cpus=$(env -u OMP_NUM_THREADS nproc)  # (GNU nproc answers OMP_NUM_THREADS when it is set)
export OMP_NUM_THREADS=1  # until the probe below shows that threads run

source scripts/build_env.sh
cmake -S . -B "$out" "${vit_launcher[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DVIT_AARCH64_SYSROOT="$sysroot" \
  -DCMAKE_BUILD_TYPE=Release -DVIT_WERROR=ON -DVIT_BUILD_BENCH=OFF -DVIT_MPI=OFF -DVIT_CAIRO=OFF -DVIT_ONNX=OFF -DVIT_SERVE=OFF -DVIT_PYTHON=OFF
targets=(vit test_core test_ops test_model test_io test_train test_data test_viz test_pretrained_fixtures
         test_fixtures)
cmake --build "$out" -j"$cpus" --target "${targets[@]}"
echo "test_aarch64: built in $((SECONDS - start)) s"

# Tests that start threads of their own with OMP_NUM_THREADS=1 (see the top of this file):
# where qemu-user runs threads, the run on one thread below lists them (qemu's strace, clone
# with CLONE_THREAD) and fails if this list misses one.
kThreadTests=(
  'Gemm\..*AnyThreadCount'
  'LinearInt8\..*'
  'LinearBf16.InsideAParallelRegionMatchesASerialCall'
  'LinearPacked.SameBitsOnOneThreadAndTwo'
  'LinearPacked.QueueRunsEachSliceOnceAfterItsPreviousChunk'
  'Simd.BiasGeluKeepsTheDerivativeTheBackwardNeeds'
  'Simd.AttentionForwardIsTheSameOnAnyThreadCount'
  'Simd.ColumnSumsAreTheSameOnAnyThreadCount'
  'Simd.ResidualLayerNormIsTheTwoCalls'
  'Model.InferenceEqualsTrainingForwardWithoutDropout'
  'Model.AForkBesideARewriteOfTheWeightsNeverSeesHalfOfIt'
  'Shards\..*'
  'AugRepeats\..*'
  'Replica\..*'
  'Features.ShardsGiveTheRowsOneModelGives'
  'Deit/DistillFixture.LossAndGradients/.*'
  'Variants/ClsTail.TrainingStepMatchesTheFullLastBlock/(shards|dim_head|distilled_wide_shards_kd)'
  'Threads.RunOnThreadsRunsEachIndexOnceWithNestedLoopsOnOneThread'
  'Threads.ForItemsOnThreadsRunsEachItemOnceAndRethrowsTheFirstFailure'
  'Threads.BindThreads.*'
  'Threads.AForkedChildRunsParallelRegions'
  'Threads.RunOpenmpWorksWhereAForkLostThePool'
  'Classifier.AForkedChildGivesTheParentsLogits'
  'Rng.FillTruncNormalIsTheSequentialLoopOnAnyThreadCount'
  'Determinism\..*'
  'Resume\..*'
  'ModelEma.FollowsTheWeightsByItsDecay'
  'GradAccum.TwoMicroBatchesOf64AreOneStepOf128'
  'Training.NonFiniteLossStopsTheRunAndKeepsTheLastGoodCheckpoint'
  'Training.LearnsASyntheticTask'
  'Schedule.StepDecaysEveryDecayEpochsCountedFromTheStartAsTimm'
  'Schedule.CooldownEpochsFollowTheCosineAtItsFloor'
  'EvalMetric.LossPicksTheLowestEvalLossForTheBestAndTheHistory'
  'Memory.PlannedActivationsAreWhatTheModelAllocates'
  'Prefetcher\..*'
  'ReadFile.APipeIsReadToItsEnd'
)
thread_tests="^($(IFS='|'; echo "${kThreadTests[*]}"))( |\$)"
probe=Prefetcher.ServesBatchesInOrderAndPassesErrorsOn
rc=0
(cd "$out/tests" && timeout 120 qemu-aarch64-static ./test_data --gtest_filter="$probe" >/dev/null 2>&1) || rc=$?
if ((rc == 124)); then
  echo "test_aarch64: qemu-user hangs on a second thread here: one OpenMP thread, leaving out the tests that start threads"
  (cd "$out" && ctest --output-on-failure -j"$cpus" -L "unit|fixture" --timeout 600 -E "$thread_tests" "$@")
else
  # First a scan, not a test: every test once on one OpenMP thread under qemu's strace (its
  # log: build-aarch64/ctest-1-thread-strace.log; strace's lines on stderr upset the tests of
  # what a program prints, so pass or fail is not judged here), for the tests that start a
  # thread all the same. Then the tests, on as many OpenMP threads as the host has CPUs.
  echo "test_aarch64: qemu-user runs threads here: the tests that start threads listed on 1 OpenMP thread, then every unit and fixture test on $cpus"
  log=$out/ctest-1-thread-strace.log
  (cd "$out" && QEMU_STRACE=1 ctest -V -j"$cpus" -L "unit|fixture" --timeout 600 "$@") >"$log" 2>&1 || true
  names=$(cd "$out" && ctest -N)
  missing=$(grep -E "^[0-9]+: .*CLONE_THREAD" "$log" | cut -d: -f1 | sort -un |
    while read -r n; do
      name=$(sed -n "s/^ *Test *#$n: //p" <<<"$names")
      [[ $name =~ $thread_tests ]] || echo "  $name"
    done)
  if [[ -n $missing ]]; then
    echo "test_aarch64: these tests start threads but kThreadTests in $0 does not list them (qemu-user"
    echo "hangs on them on machines where it cannot run threads): add them"
    echo "$missing"
    exit 1
  fi
  unset OMP_NUM_THREADS
  (cd "$out" && ctest --output-on-failure -j"$cpus" -L "unit|fixture" --timeout 600 "$@")
fi
# The int8 kernels on an Armv8.0 core without the dot-product extension (qemu's default CPU,
# max, has it): the table must pick the smull + sadalp product, with the generic bits.
echo "test_aarch64: test_ops' int8 kernels under qemu -cpu cortex-a53 (no dot product)"
(cd "$out" && QEMU_CPU=cortex-a53 OMP_NUM_THREADS=1 ctest --output-on-failure -L unit --timeout 600 \
  -R '^(GemmS8|Int8Quant)\.')
echo "test_aarch64: done in $((SECONDS - start)) s"
