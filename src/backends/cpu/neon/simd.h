// NEON (Advanced SIMD, part of every aarch64 CPU) building blocks for the element-wise
// kernels, 4 lanes: the formulas of avx2/simd.h and avx512/simd.h, so every path agrees to
// within the same stated bounds. This folder is compiled for aarch64 only (CMakeLists.txt),
// where NEON needs no target attribute. NEON has no masked loads: a tail of n < 4 floats goes
// lane by lane (load / store below), reading and writing only the n. (Through a zero-padded
// buffer and memcpy instead, GCC 12 warned of a copy past the buffer, -Warray-bounds, where
// the packed linear's unrolled blocks inline many of them.)
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/gelu.h"  // kInvSqrt2

namespace vit::cpu::neon {

// The first n floats at p (n >= 4: a full load); lanes past n are 0.
inline float32x4_t load(const float* p, int64_t n) {
  if (n >= 4) return vld1q_f32(p);
  float32x4_t v = vdupq_n_f32(0.f);
  if (n > 0) v = vld1q_lane_f32(p, v, 0);
  if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
  if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
  return v;
}
// v's first n lanes to p (n >= 4: a full store).
inline void store(float* p, int64_t n, float32x4_t v) {
  if (n >= 4) return vst1q_f32(p, v);
  if (n > 0) vst1q_lane_f32(p, v, 0);
  if (n > 1) vst1q_lane_f32(p + 1, v, 1);
  if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}
// Lane i all ones for i < n (n clamped to [0, 4]).
inline uint32x4_t tail_mask(int64_t n) {
  const int32_t k = int32_t(n < 0 ? 0 : n > 4 ? 4 : n);
  const int32_t idx[4] = {0, 1, 2, 3};
  return vcltq_s32(vld1q_s32(idx), vdupq_n_s32(k));
}

// Sum and max over the 4 lanes, pairwise in a fixed order.
inline float hsum(float32x4_t v) {
  return vaddvq_f32(v);
}
inline float hmax(float32x4_t v) {
  return vmaxvq_f32(v);
}

// exp(x) lane-wise for x <= 0: 2^t, t = x log2(e) = n + f, n = round(t), the rounding of t
// put back into f by two FMAs, 2^f by the degree-6 polynomial of the x86 paths, 2^n built in
// the exponent field (n >= -126 here). Below -87.3365 (and -inf) 0; NaN stays NaN.
inline float32x4_t exp_nonpos(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.3365f);
  const float32x4_t log2e = vdupq_n_f32(1.44269504088896341f), log2e_lo = vdupq_n_f32(1.925963e-8f);
  const uint32x4_t drop = vcltq_f32(x, lo);  // false for NaN: NaN is kept
  x = vbslq_f32(drop, lo, x);
  const float32x4_t t = vmulq_f32(x, log2e);
  const float32x4_t t_err = vfmaq_f32(vfmsq_f32(vnegq_f32(t), x, vnegq_f32(log2e)), x, log2e_lo);
  const float32x4_t n = vrndnq_f32(t);
  const float32x4_t f = vaddq_f32(vsubq_f32(t, n), t_err);
  float32x4_t p = vdupq_n_f32(1.534582261e-04f);
  p = vfmaq_f32(vdupq_n_f32(1.339993207e-03f), p, f);
  p = vfmaq_f32(vdupq_n_f32(9.618489072e-03f), p, f);
  p = vfmaq_f32(vdupq_n_f32(5.550328642e-02f), p, f);
  p = vfmaq_f32(vdupq_n_f32(2.402264625e-01f), p, f);
  p = vfmaq_f32(vdupq_n_f32(6.931471825e-01f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.f), p, f);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vbslq_f32(drop, vdupq_n_f32(0.f), y);
}

// erf(x) lane-wise (Abramowitz & Stegun 7.1.26); *exp_neg_x2 receives exp(-x^2).
inline float32x4_t erf(float32x4_t x, float32x4_t* exp_neg_x2) {
  const float32x4_t a = vabsq_f32(x);
  const float32x4_t t = vdivq_f32(vdupq_n_f32(1.f), vfmaq_f32(vdupq_n_f32(1.f), a, vdupq_n_f32(0.3275911f)));
  float32x4_t p = vdupq_n_f32(1.061405429f);
  p = vfmaq_f32(vdupq_n_f32(-1.453152027f), p, t);
  p = vfmaq_f32(vdupq_n_f32(1.421413741f), p, t);
  p = vfmaq_f32(vdupq_n_f32(-0.284496736f), p, t);
  p = vfmaq_f32(vdupq_n_f32(0.254829592f), p, t);
  p = vmulq_f32(p, t);
  const float32x4_t e = exp_nonpos(vnegq_f32(vmulq_f32(a, a)));
  *exp_neg_x2 = e;
  const float32x4_t y = vfmsq_f32(vdupq_n_f32(1.f), p, e);  // 1 - p e = erf(|x|)
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
  return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(y), sign));
}

// Exact GELU, v Phi(v) = 0.5 v (1 + erf(v / sqrt 2)), lane-wise from erf(v / sqrt 2); gelu(v)
// from v alone (the packed linear's fused epilogue: the same bits as gelu.cpp's pass).
inline float32x4_t gelu_from(float32x4_t v, float32x4_t erf) {
  return vmulq_f32(vmulq_n_f32(v, 0.5f), vaddq_f32(vdupq_n_f32(1.f), erf));
}
inline float32x4_t gelu(float32x4_t v) {
  float32x4_t e;
  return gelu_from(v, erf(vmulq_n_f32(v, kInvSqrt2), &e));
}

}  // namespace vit::cpu::neon
