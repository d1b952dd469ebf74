// The residual sum of residual.cpp in AVX-512 vectors. Declared in kernels.h.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"

namespace vit::cpu::avx512 {

// out[0, n) = x + s branch in vectors: a sample without LayerScale is one contiguous run.
// The same two roundings as residual.cpp's loop (a product, then a sum; no fma: this file is
// compiled with -ffp-contract=off, CMakeLists.txt), so the same bits.
VIT_AVX512 void residual_run(float* out, const float* x, const float* branch, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = simd::lanes(n - i);
    const __m512 y = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i),
                                   _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, branch + i)));
    _mm512_mask_storeu_ps(out + i, m, y);
  }
}

}  // namespace vit::cpu::avx512
