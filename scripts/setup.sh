#!/usr/bin/env bash
# Installs every build and test dependency of vitcpp from Debian 12 packages.
#   scripts/setup.sh            the build, tests and benchmarks
#   scripts/setup.sh --torch    also Debian's PyTorch, to regenerate the test fixtures
#                               (tools/make_fixtures.py) and run bench/peers
#   scripts/setup.sh --fuzz     also clang, libFuzzer and LLVM's OpenMP for scripts/fuzz.sh
#   scripts/setup.sh --aarch64  also the arm64 cross compiler and qemu-user for
#                               scripts/test_aarch64.sh (which fetches the arm64 libraries)
# Packages already installed are not fetched again, so a second run needs no network.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libdnnl-dev            # oneDNN: the matrix products (see docs/design.md for why)
  libopenblas-dev        # only for bench_gemm's comparison with OpenBLAS
  nlohmann-json3-dev     # JSON configs and safetensors headers
  libcli11-dev           # command-line parsing
  zlib1g-dev libpng-dev libjpeg-dev             # datasets and images
  libcairo2-dev fonts-dejavu-core               # figures: attention maps, curves (text via fontconfig)
  libgtest-dev libgmock-dev libbenchmark-dev    # tests and benchmarks
  libopenmpi-dev openmpi-bin                    # data-parallel training (docs/distributed.md)
)
for arg in "$@"; do
  case "$arg" in
    --torch) packages+=(python3-torch python3-numpy python3-torchvision python3-pil
                      libjemalloc2) ;;  # bench/peers: PyTorch's best setup preloads jemalloc
    --fuzz) packages+=(clang libclang-rt-14-dev libomp-14-dev) ;;
    --aarch64) packages+=(crossbuild-essential-arm64 qemu-user-static) ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
