# Cross-compiling for aarch64 (arm64) Linux with Debian's crossbuild-essential-arm64, tests run
# under qemu-user: scripts/test_aarch64.sh sets it up and uses it. The arm64 libraries come
# from a folder of unpacked Debian packages (VIT_AARCH64_SYSROOT, made by the script), not
# from the host's /usr, so nothing of the host's amd64 /usr is searched.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The folder holding usr/include and usr/lib/aarch64-linux-gnu of the unpacked packages.
set(VIT_AARCH64_SYSROOT "" CACHE PATH "unpacked arm64 packages (scripts/test_aarch64.sh)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES VIT_AARCH64_SYSROOT)
if(NOT VIT_AARCH64_SYSROOT)
  message(FATAL_ERROR "set -DVIT_AARCH64_SYSROOT=<folder of unpacked arm64 packages> (scripts/test_aarch64.sh)")
endif()
# Searched in this order: the cross toolchain's own libraries (libc, libstdc++, libgomp),
# then the unpacked packages; programs (pkg-config, the MPI wrappers) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu ${VIT_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Headers of the packages, with the arch-specific ones (jconfig.h) where Debian puts them.
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES ${VIT_AARCH64_SYSROOT}/usr/include/aarch64-linux-gnu)
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${VIT_AARCH64_SYSROOT}/usr/include/aarch64-linux-gnu)
# The packages' shared libraries depend on each other (libpng on libz): let the linker find
# them there.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${VIT_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${VIT_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")

# ctest (and gtest_discover_tests at build time) run the arm64 programs through qemu-user;
# QEMU_LD_PREFIX=/usr/aarch64-linux-gnu (set by the script) points it at the arm64 libc.
find_program(VIT_QEMU_AARCH64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${VIT_QEMU_AARCH64})
