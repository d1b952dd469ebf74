// patch_embed.cpp's copy of short patch rows in AVX-512 vector moves. Declared in kernels.h.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"

namespace vit::cpu::avx512 {

// A row of patches (py of sample b) from the image's rows in order: row i of channel c is
// Gw segments of Pw floats, each to its patch's row (K floats apart). Short segments (the
// seeds' 4-pixel patches: 16 bytes) in vector moves, where a memcpy call costs more.
VIT_AVX512 void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                                     int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw) {
  const int64_t K = C * Ph * Pw;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < Ph; ++i) {
      const float* src = x + ((b * C + c) * Hi + py * Ph + i) * Wi;
      float* dst = out + (c * Ph + i) * Pw;
      if (Pw == 4)
        for (int64_t px = 0; px < Gw; ++px) _mm_storeu_ps(dst + px * K, _mm_loadu_ps(src + px * 4));
      else
        for (int64_t px = 0; px < Gw; ++px) simd::copy_short(dst + px * K, src + px * Pw, Pw);
    }
}

}  // namespace vit::cpu::avx512
