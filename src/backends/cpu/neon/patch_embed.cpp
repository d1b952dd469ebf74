// patch_embed.cpp's copy of short patch rows in NEON vector moves (the walk: patch_embed.h).
// Declared in kernels.h.
#include "backends/cpu/patch_embed.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
inline void copy4(float* dst, const float* src) {
  vst1q_f32(dst, vld1q_f32(src));
}
// n <= 16 floats in vectors; a tail of fewer than 4 through simd.h's load and store.
inline void copy_short(float* dst, const float* src, int64_t n) {
  for (int64_t j = 0; j < n; j += 4) store(dst + j, n - j, load(src + j, n - j));
}
}  // namespace

VIT_COPY_PATCH_ROW_SHORT()

}  // namespace vit::cpu::neon
