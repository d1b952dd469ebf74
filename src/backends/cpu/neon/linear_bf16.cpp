// Rounding to bf16 in NEON vectors for linear_bf16.cpp's round_to_bf16. Declared in kernels.h.
#include <cstring>

#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// linear_bf16.cpp's to_bf16 on 4 floats in integer lanes (the same bits): u + 0x7fff + the
// lowest kept bit, its top half (round to nearest, ties to even; overflow carries into the
// exponent, to infinity); a NaN keeps its top half with the quiet bit set.
inline uint16x4_t to_bf16(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint16x4_t rounded = vshrn_n_u32(vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), odd)), 16);
  const uint16x4_t quiet = vorr_u16(vshrn_n_u32(u, 16), vdup_n_u16(0x40));
  const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
  return vbsl_u16(vmovn_u32(nan), quiet, rounded);
}
}  // namespace

// 8 floats at a time; a tail of fewer than 8 through a zero-padded buffer (only its n written).
void round_to_bf16(uint16_t* dst, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    vst1q_u16(dst + i, vcombine_u16(to_bf16(vld1q_f32(x + i)), to_bf16(vld1q_f32(x + i + 4))));
  if (i == n) return;
  uint16_t t[8];
  const float32x4_t hi = n - i > 4 ? load(x + i + 4, n - i - 4) : vdupq_n_f32(0.f);
  vst1q_u16(t, vcombine_u16(to_bf16(load(x + i, n - i)), to_bf16(hi)));
  std::memcpy(dst + i, t, size_t(n - i) * sizeof(uint16_t));
}

}  // namespace vit::cpu::neon
