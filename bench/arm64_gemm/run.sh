#!/usr/bin/env bash
# oneDNN's dnnl_sgemm against OpenBLAS's cblas_sgemm on aarch64, without an arm64 machine:
# cross-compiles arm64_gemm.cpp against Debian's arm64 libdnnl2 and libopenblas0-pthread
# (unpacked into build-arm64-gemm/sysroot, as scripts/test_aarch64.sh does) and runs it under
# qemu-user, one thread. Then, unless --no-count, counts the instructions each call executes
# with insn_count.so (a qemu plugin; needs Debian's dynamically linked qemu-user, whose
# qemu-aarch64 loads plugins; the -static one cannot).
#
# Usage: bench/arm64_gemm/run.sh [--reps N] [--no-time] [--no-count] [--only NAME]
#   QEMU_CPU=a64fx|neoverse-n1|cortex-a72|... picks the emulated CPU (qemu's default: max)
#   OPENBLAS_CORETYPE=NEOVERSEN1|ARMV8|... forces OpenBLAS's kernels (default: its detection)
# Emulated time is a weak proxy for a real core's (see docs/benchmarks.md, "### aarch64").
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=5 time=1 count=1 only=()
while (($#)); do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --no-time) time=0; shift ;;
    --no-count) count=0; shift ;;
    --only) only=(--only "$2"); shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
scripts/setup.sh --aarch64 --qemu-plugins >/dev/null

out=$PWD/build-arm64-gemm
sysroot=$out/sysroot
arm64=(libdnnl-dev:arm64 libdnnl2:arm64 libopenblas-dev:arm64 libopenblas-pthread-dev:arm64
       libopenblas0-pthread:arm64 libgfortran5:arm64)  # OpenBLAS's LAPACK part needs libgfortran
if [[ "$(cat "$sysroot/.packages" 2>/dev/null)" != "${arm64[*]}" ]]; then
  rm -rf "$sysroot" "$out/debs"
  mkdir -p "$sysroot" "$out/debs"
  (cd "$out/debs" && apt-get download -qq "${arm64[@]}")
  for deb in "$out"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
  echo "${arm64[*]}" >"$sysroot/.packages"
fi
lib=$sysroot/usr/lib/aarch64-linux-gnu
aarch64-linux-gnu-g++ -std=c++20 -O2 -Wall -Wextra -Werror -o "$out/arm64_gemm" bench/arm64_gemm/arm64_gemm.cpp \
  -I"$sysroot/usr/include" -I"$sysroot/usr/include/aarch64-linux-gnu/openblas-pthread" \
  -L"$lib" -L"$lib/openblas-pthread" -ldnnl -lopenblas -Wl,-rpath-link,"$lib"
gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o "$out/insn_count.so" bench/arm64_gemm/insn_count.c

# The arm64 loader and libc from the cross compiler's folder, the packages' libraries from
# the sysroot. One thread: under qemu-user on some machines a second thread never starts
# (scripts/test_aarch64.sh), and one core is what emulation can say anything about.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export QEMU_SET_ENV="LD_LIBRARY_PATH=$lib:$lib/openblas-pthread"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "== qemu-aarch64 $(qemu-aarch64-static --version | awk 'NR == 1 {print $3}'), cpu ${QEMU_CPU:-max}"
# Without --no-time, the table of times and the libraries' agreement; the first line names
# the kernels the libraries chose either way.
args=(--reps "$reps" "${only[@]}")
((time)) || args=(--info)
qemu-aarch64-static "$out/arm64_gemm" "${args[@]}"
((count)) || exit 0

# Instructions per call: the program with 3 calls minus with 1, halved (so the setup, the
# first call's one-off work and the libraries' start-up drop out).
echo "== instructions per call (qemu plugin insn_count.so): total, per multiply-add, FP multiply(-add)s, loads+stores"
printf '%-14s %-8s %14s %8s %12s %12s %12s %12s\n' shape lib insns insn/mac fp_vector fp_sve fp_scalar mem
shapes=$(grep -o '{"[a-z0-9.]*", *\(true\|false\), *\(true\|false\), *[0-9]*, *[0-9]*, *[0-9]*}' \
  bench/arm64_gemm/arm64_gemm.cpp | tr -d '{}" ' | tr ',' ' ')
while read -r name _ _ m n k; do
  [[ ${#only[@]} -eq 0 || ${only[1]} == "$name" ]] || continue
  for l in dnnl openblas; do
    counts() {
      qemu-aarch64 -plugin "$out/insn_count.so" "$out/arm64_gemm" --count "$name" "$l" "$1" 2>&1 >/dev/null |
        awk '/^insns /{print $2, $4, $6, $8, $10}'
    }
    read -r i1 v1 s1 c1 m1 < <(counts 1)
    read -r i3 v3 s3 c3 m3 < <(counts 3)
    awk -v n="$name" -v l="$l" -v mac="$((m * n * k))" -v i="$((i3 - i1))" -v v="$((v3 - v1))" -v s="$((s3 - s1))" \
      -v c="$((c3 - c1))" -v x="$((m3 - m1))" 'BEGIN { printf "%-14s %-8s %14d %8.3f %12d %12d %12d %12d\n", n, l,
      i / 2, i / 2 / mac, v / 2, s / 2, c / 2, x / 2 }'
  done
done <<<"$shapes"
