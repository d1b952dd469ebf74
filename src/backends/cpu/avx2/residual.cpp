// The residual sum of residual.cpp in AVX2 vectors (avx512/residual.cpp's residual_run in 8
// lanes). Declared in kernels.h.
#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

// out[0, n) = x + s branch: a sample without LayerScale is one contiguous run. The same two
// roundings as residual.cpp's loop (a product, then a sum; no fma: this file is compiled with
// -ffp-contract=off, CMakeLists.txt), so the same bits.
VIT_AVX2 void residual_run(float* out, const float* x, const float* branch, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8)
    store(out + i, n - i, _mm256_add_ps(load(x + i, n - i), _mm256_mul_ps(vs, load(branch + i, n - i))));
}

}  // namespace vit::cpu::avx2
