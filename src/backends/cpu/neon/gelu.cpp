// Exact GELU's NEON kernels (gelu.h): neon/simd.h's erf (the x86 paths' formula, absolute
// error <= 1.5e-7), 4 lanes, tails through a padded buffer.
#include "backends/cpu/gelu.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// GELU(v) = 0.5 v (1 + erf(v / sqrt 2)); GELU'(v) = Phi(v) + v phi(v), from the same erf and
// exp(-v^2 / 2).
inline float32x4_t gelu_from(float32x4_t v, float32x4_t erf) {
  return vmulq_f32(vmulq_n_f32(v, 0.5f), vaddq_f32(vdupq_n_f32(1.f), erf));
}
inline float32x4_t gelu_grad_from(float32x4_t v, float32x4_t erf, float32x4_t e) {
  const float32x4_t cdf = vmulq_n_f32(vaddq_f32(vdupq_n_f32(1.f), erf), 0.5f);
  return vfmaq_f32(cdf, vmulq_n_f32(v, kInvSqrt2Pi), e);
}
inline float32x4_t erf_of(float32x4_t v, float32x4_t* e) {
  return erf(vmulq_n_f32(v, kInvSqrt2), e);
}
}  // namespace

void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 4) {
    const float32x4_t v = load(x + i, i1 - i);
    float32x4_t e;
    const float32x4_t erf = erf_of(v, &e);
    store(y + i, i1 - i, gelu_from(v, erf));
  }
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 4) {
    const float32x4_t v = load(x + i, i1 - i);
    float32x4_t e;
    const float32x4_t erf = erf_of(v, &e);
    store(dx + i, i1 - i, vmulq_f32(load(dy + i, i1 - i), gelu_grad_from(v, erf, e)));
  }
}

void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                    bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 4) {
      const int64_t i = r * N + j, n = N - j;
      const float32x4_t v = vaddq_f32(load(h + i, n), load(bias + j, n));
      float32x4_t e;
      const float32x4_t erf = erf_of(v, &e);
      store(y + i, n, gelu_from(v, erf));
      if (keep_grad) store(h + i, n, gelu_grad_from(v, erf, e));
    }
}

}  // namespace vit::cpu::neon
