#!/usr/bin/env bash
# The shared library: configures build-shared/ with -DBUILD_SHARED_LIBS=ON (objects compiled
# with -fvisibility=hidden, cmake/vitcpp.map), builds vit and the install test there, and runs
# ctest's `install` label: the examples built from an installed prefix against libvitcpp.so
# print vit predict's top-5, and the library exports the public API alone
# (Install.ASharedLibraryExportsThePublicApiAlone). scripts/test.sh runs it after the native
# suite (VIT_TEST_SHARED=0 skips it); the default build is static, so without this stage the
# shared one went untested.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build_env.sh
cmake -S . -B build-shared "${vit_launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DVIT_WERROR=ON \
  -DBUILD_SHARED_LIBS=ON >/dev/null
cmake --build build-shared -j"$(nproc)" --target vit test_install
(cd build-shared && ctest --output-on-failure -L install)
