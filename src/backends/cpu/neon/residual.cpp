// The residual sum of residual.cpp in NEON vectors. Declared in kernels.h.
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

// out[0, n) = x + s branch in vectors: a sample without LayerScale is one contiguous run. The
// same two roundings as residual.cpp's loop (a product, then a sum; no fma: the build's
// -ffp-contract=off keeps the compiler from fusing them).
void residual_run(float* out, const float* x, const float* branch, float s, int64_t n) {
  const float32x4_t vs = vdupq_n_f32(s);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(out + i, vaddq_f32(vld1q_f32(x + i), vmulq_f32(vs, vld1q_f32(branch + i))));
  if (i < n) store(out + i, n - i, vaddq_f32(load(x + i, n - i), vmulq_f32(vs, load(branch + i, n - i))));
}

}  // namespace vit::cpu::neon
