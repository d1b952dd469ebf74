// Exact GELU's AVX2 + FMA kernels (gelu.h): simd.h's erf (the AVX-512 path's formula,
// absolute error <= 1.5e-7), 8 lanes, tails through vmaskmov.
#include "backends/cpu/gelu.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

namespace {
// GELU(v) = 0.5 v (1 + erf(v / sqrt 2)) and, from the same erf and exp(-v^2 / 2),
// GELU'(v) = Phi(v) + v phi(v).
VIT_AVX2 inline __m256 gelu_from(__m256 v, __m256 erf) {
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.f), erf));
}
VIT_AVX2 inline __m256 gelu_grad_from(__m256 v, __m256 erf, __m256 e) {
  const __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.f), erf));
  return _mm256_fmadd_ps(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2Pi)), e, cdf);
}
VIT_AVX2 inline __m256 erf_of(__m256 v, __m256* e) {
  return erf(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)), e);
}
}  // namespace

VIT_AVX2 void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) {
    const __m256 v = load(x + i, i1 - i);
    __m256 e;
    store(y + i, i1 - i, gelu_from(v, erf_of(v, &e)));
  }
}

VIT_AVX2 void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) {
    const __m256 v = load(x + i, i1 - i);
    __m256 e;
    const __m256 erf = erf_of(v, &e);  // before e is read: arguments have no order
    const __m256 g = gelu_grad_from(v, erf, e);
    store(dx + i, i1 - i, _mm256_mul_ps(load(dy + i, i1 - i), g));
  }
}

VIT_AVX2 void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                             bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 8) {
      const int64_t i = r * N + j, n = N - j;
      const __m256 v = _mm256_add_ps(load(h + i, n), load(bias + j, n));
      __m256 e;
      const __m256 erf = erf_of(v, &e);
      store(y + i, n, gelu_from(v, erf));
      if (keep_grad) store(h + i, n, gelu_grad_from(v, erf, e));
    }
}

}  // namespace vit::cpu::avx2
