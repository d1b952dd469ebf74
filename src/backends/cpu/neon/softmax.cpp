// Attention's row softmax and its backward in NEON (softmax.h), and warm_rows: the x86 kernels' passes
// (max; exp and sum; scale) in 4 lanes, one row at a time (each row's arithmetic is its own).
#include <limits>

#include "backends/cpu/neon/simd.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::neon {

void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    float* row = P + i * n;
    if (km)
      for (int64_t j = 0; j < n; ++j)
        if (!km[j]) row[j] = kNegInf;
    float32x4_t mx = vdupq_n_f32(kNegInf);
    for (int64_t j = 0; j < n; j += 4)  // lanes past n read as -inf
      mx = vmaxq_f32(mx, vbslq_f32(tail_mask(n - j), load(row + j, n - j), vdupq_n_f32(kNegInf)));
    const float rmax = hmax(mx);
    const bool dead = rmax == kNegInf;  // every key masked: a row of zeros
    const float32x4_t vmax = vdupq_n_f32(dead ? 0.f : rmax);
    float32x4_t sum = vdupq_n_f32(0.f);
    for (int64_t j = 0; j < n; j += 4) {
      const float32x4_t e = vreinterpretq_f32_u32(vandq_u32(
          tail_mask(n - j), vreinterpretq_u32_f32(exp_nonpos(vsubq_f32(load(row + j, n - j), vmax)))));
      store(row + j, n - j, e);
      sum = vaddq_f32(sum, e);
    }
    const float inv = dead ? 0.f : 1.f / hsum(sum);
    for (int64_t j = 0; j < n; j += 4) store(row + j, n - j, vmulq_n_f32(load(row + j, n - j), inv));
  }
}

void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dP + i * n;
    const float* p = P + i * n;
    float32x4_t dot = vdupq_n_f32(0.f);
    for (int64_t j = 0; j < n; j += 4) dot = vfmaq_f32(dot, load(p + j, n - j), load(d + j, n - j));
    const float32x4_t s = vdupq_n_f32(hsum(dot));
    for (int64_t j = 0; j < n; j += 4)
      store(d + j, n - j, vmulq_f32(load(p + j, n - j), vsubq_f32(load(d + j, n - j), s)));
  }
}

void exp_nonpos(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) store(y + i, n - i, neon::exp_nonpos(load(x + i, n - i)));
}

// One load per 64 bytes: each cache line of p[0, n) is read once (a tail under 16 floats is
// left, as on AVX-512).
void warm_rows(const float* p, int64_t n) {
  float32x4_t acc = vdupq_n_f32(0.f);
  for (int64_t i = 0; i + 16 <= n; i += 16) acc = vmaxq_f32(acc, vld1q_f32(p + i));
  volatile float sink = hmax(acc);  // keeps the loads
  (void)sink;
}

}  // namespace vit::cpu::neon
