// patch_embed.cpp's copy of short patch rows in AVX-512 vector moves (the walk: patch_embed.h).
// Declared in kernels.h.
#include "backends/cpu/patch_embed.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"

namespace vit::cpu::avx512 {

namespace {
VIT_AVX512 inline void copy4(float* dst, const float* src) {
  _mm_storeu_ps(dst, _mm_loadu_ps(src));
}
using simd::copy_short;
}  // namespace

VIT_COPY_PATCH_ROW_SHORT(VIT_AVX512)

}  // namespace vit::cpu::avx512
