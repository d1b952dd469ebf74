# Sourced by the scripts that configure a build (test.sh, test_sanitize.sh, fuzz.sh,
# test_aarch64.sh): compile through ccache when it is installed (scripts/setup.sh installs it).
#   "${vit_launcher[@]}"   the CMake arguments that put ccache in front of the compilers
# The cache is ccache's own (~/.cache/ccache, 5 GB). CCACHE_BASEDIR makes the paths under the
# checkout relative, so a second clone in another folder (CI's fresh clone) hits what this
# one compiled; CCACHE_NOHASHDIR keeps the working directory out of the hash of -g builds.
# The four builds differ in compiler or flags and share nothing with each other: the cache
# pays off when a build is made again (the next CI run, a developer's second build), where
# only the changed files compile. VIT_CCACHE=0 turns it off. docs/reliability.md lists what
# each stage costs with a cold and a warm cache.
vit_launcher=()
if [[ ${VIT_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  vit_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
else
  # A build dir configured with ccache before keeps its launcher in CMakeCache.txt: clear it.
  vit_launcher=(-UCMAKE_C_COMPILER_LAUNCHER -UCMAKE_CXX_COMPILER_LAUNCHER)
fi
