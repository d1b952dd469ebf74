#!/usr/bin/env bash
# The whole test suite: install dependencies, build with warnings as errors, run ctest.
# Pick a subset with labels: scripts/test.sh -L unit   (or -L fixture, -L cli, -LE slow)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVIT_WERROR=ON
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
