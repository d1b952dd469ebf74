// Run-time choice between the AVX-512 kernels and the reference ones (see simd.h).
#include "backends/cpu/simd.h"

#include <cstdlib>
#include <cstring>

namespace vit::cpu::simd {

bool avx512() {
  static const bool on = [] {
    const char* env = std::getenv("VIT_SIMD");
    if (env && std::strcmp(env, "off") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  }();
  return on;
}

}  // namespace vit::cpu::simd
