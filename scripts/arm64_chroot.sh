#!/usr/bin/env bash
# A Debian 12 arm64 machine without one: debootstraps arm64 Debian into a folder, runs its
# programs through qemu-user (binfmt_misc), and there does what a user on an arm64 machine
# does with a fresh clone of this repository: the README's two commands, natively built
# (arm64 g++, cmake, Debian's arm64 packages installed by scripts/setup.sh).
# scripts/test_aarch64.sh (which CI runs) cross-builds instead and runs only the unit and
# fixture tests; this checks the native build, the setup script's arm64 branch, the cli,
# install and mpi tests and the quick start. It is slow (every compiler and test runs
# emulated: about an hour on 2 cores), so it is run by hand, not by CI.
#
# Needs root, debootstrap and qemu-user-static (apt-get install debootstrap qemu-user-static),
# and a kernel that lets binfmt_misc be mounted. The host's local CA certificates
# (/usr/local/share/ca-certificates) are copied in, for machines whose network goes through a
# proxy with its own certificate authority.
#
# What qemu-user cannot do, and the tests it therefore fails (left out below):
#   - a signal the program ignores is not ignored any more after the program execs: qemu
#     installs its own handler for every signal, and an exec resets handlers (it keeps only
#     SIG_IGN), so the new qemu starts with the default action. vit execs itself once to
#     set its OpenMP wait policy (apps/vit/main.cpp), so in
#     CrashSafety.ACheckpointWriteThatFailsPartWayKeepsThePreviousFileAndNamesIt the
#     SIGXFSZ the test ignores (to get EFBIG from write, as a full disk gives ENOSPC) kills
#     vit instead. Seen with a 20-line program: ignored before execv("/proc/self/exe"),
#     default after it under qemu-aarch64 7.2, ignored after it natively; with
#     OMP_WAIT_POLICY set (no exec) vit prints the test's error under qemu too.
#   - onnxruntime-node's arm64 library dies with SIGSEGV as node loads it; the tests that
#     run ONNX Runtime skip, saying so.
# Usage: scripts/arm64_chroot.sh [DIR] [more ctest arguments for scripts/test.sh]
#   DIR defaults to /var/tmp/vitcpp-arm64 (made once, reused); the clone inside is fresh.
#   scripts/test.sh runs the whole ctest suite; given arguments it skips its later stages
#   (forced paths, sanitizers, fuzzers, the aarch64 cross build), which would take hours
#   emulated. Measured (2 Zen 5 cores, 2026-11-26): the build about 35 min, ctest 12.5 min,
#   the quick start's training 7 min.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "arm64_chroot: needs root (chroot, mount, binfmt_misc)" >&2; exit 2; }
root=${1:-/var/tmp/vitcpp-arm64}
shift $(($# > 0 ? 1 : 0))
for tool in debootstrap qemu-aarch64-static; do
  command -v $tool >/dev/null || { echo "arm64_chroot: $tool missing (apt-get install debootstrap qemu-user-static)" >&2; exit 2; }
done

# qemu-user for arm64 programs, by binfmt_misc; F (fix binary) opens the interpreter now, so
# it runs inside the chroot too.
[[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register  # flags POF
fi

if [[ ! -x $root/usr/bin/apt-get ]]; then
  debootstrap --arch=arm64 --variant=minbase bookworm "$root" http://deb.debian.org/debian
fi
cat >"$root/etc/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
for fs in proc sys dev; do
  mountpoint -q "$root/$fs" || mount --rbind "/$fs" "$root/$fs"
done
trap 'for fs in dev sys proc; do umount -R "$root/$fs" 2>/dev/null || true; done' EXIT
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  [[ -x $root/usr/sbin/update-ca-certificates ]] ||
    chroot "$root" /bin/sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates'
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
  echo "cafile=/etc/ssl/certs/ca-certificates.crt" >"$root/root/.npmrc"
fi

rm -rf "$root/root/vitcpp"
git clone -q . "$root/root/vitcpp"
echo "arm64_chroot: $(git rev-parse --short HEAD) in $root/root/vitcpp"
# The test command first, so that the build it makes (warnings as errors) is the one the
# quick start reuses.
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c \
  'cd /root/vitcpp && uname -m && scripts/test.sh "$@" && scripts/quickstart.sh' \
  arm64 -E '^CrashSafety\.ACheckpointWriteThatFailsPartWayKeepsThePreviousFileAndNamesIt$' "$@"
