#!/usr/bin/env bash
# Installs every build and test dependency of vitcpp from Debian 12 packages, and ONNX
# Runtime (npm onnxruntime-node, pinned by bench/peers/ort/package-lock.json) for the ONNX
# export's test and bench/peers.
#   scripts/setup.sh            the build, tests and benchmarks
#   scripts/setup.sh --torch    also Debian's PyTorch, to regenerate the test fixtures
#                               (tools/make_fixtures.py) and run bench/peers
#   scripts/setup.sh --fuzz     also clang, libFuzzer and LLVM's OpenMP for scripts/fuzz.sh
#   scripts/setup.sh --aarch64  also the arm64 cross compiler and qemu-user for
#                               scripts/test_aarch64.sh (which fetches the arm64 libraries)
#   scripts/setup.sh --qemu-plugins  also qemu-user (its qemu-aarch64 loads plugins) for
#                               bench/arm64_gemm/run.sh's instruction counts
# Packages already installed are not fetched again, so a second run needs no network.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  ccache                 # compiler cache for the four builds of scripts/test.sh (scripts/build_env.sh)
  python3                # scripts/check_isa_code.py (scripts/test_isa.sh)
  libdnnl-dev            # oneDNN: the matrix products (see docs/design.md for why)
  libopenblas-dev        # x86-64: only for bench_gemm's comparison with OpenBLAS
  nlohmann-json3-dev     # JSON configs and safetensors headers
  libcli11-dev           # command-line parsing
  zlib1g-dev libpng-dev libjpeg-dev             # datasets and images
  libcairo2-dev fonts-dejavu-core               # figures: attention maps, curves (text via fontconfig)
  libgtest-dev libgmock-dev libbenchmark-dev    # tests and benchmarks
  libopenmpi-dev openmpi-bin                    # data-parallel training (docs/distributed.md)
  libonnx-dev libprotobuf-dev                   # vit export --format onnx (ONNX's C++ library)
  libcpp-httplib-dev wrk                        # vit serve's HTTP server (docs/serving.md); wrk: its load figures
  libssl-dev openssl                            # vit serve's TLS (--ssl-*); openssl: tests/fixtures/tls/make.sh
  libgrpc++-dev protobuf-compiler-grpc          # vit serve --grpc-port (src/serve/inference.proto)
  protobuf-compiler python3-grpcio python3-protobuf  # its tests' gRPC client (tests/serve/test_grpc.py)
  pybind11-dev python3-dev python3-numpy        # the Python module (python/, docs/python.md)
  python3-pytest python3-pip python3-venv python3-setuptools python3-wheel python3-build python3-pil
  locales                                       # localedef: a comma-decimal locale for tests/python/test_train.py
)
# aarch64: the matrix products go through OpenBLAS's OpenMP build (CMake's VIT_SGEMM,
# docs/design.md), installed alone so that Debian's alternatives for libopenblas.so.0 (what
# the programs load) point to it and not to the pthreads build.
if [[ $(uname -m) == aarch64 ]]; then
  packages=("${packages[@]/libopenblas-dev/libopenblas-openmp-dev}")
fi
# Node.js runs ONNX Runtime's npm package; a node already on PATH (e.g. NodeSource's) will do.
command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)
for arg in "$@"; do
  case "$arg" in
    --torch) packages+=(python3-torch python3-numpy python3-torchvision python3-pil
                      libjemalloc2) ;;  # bench/peers: PyTorch's best setup preloads jemalloc
    --fuzz) packages+=(clang libclang-rt-14-dev libomp-14-dev) ;;
    --aarch64) packages+=(crossbuild-essential-arm64 qemu-user-static) ;;
    --qemu-plugins) packages+=(qemu-user) ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime's CPU library from npm (its native binaries ship in the package, so no install
# scripts run). Without it the test that runs exported ONNX files in ONNX Runtime skips.
ort_dir="$(cd "$(dirname "$0")/.." && pwd)/bench/peers/ort"
if [[ -f $ort_dir/node_modules/onnxruntime-node/package.json ]]; then
  echo "setup: ONNX Runtime (npm onnxruntime-node) present"
else
  echo "setup: installing ONNX Runtime (npm onnxruntime-node) in bench/peers/ort"
  (cd "$ort_dir" && npm ci --ignore-scripts --no-audit --no-fund) ||
    echo "setup: npm ci failed: the ONNX Runtime comparison (test_onnx_export) will skip" >&2
fi
