// The walk of im2col_patches' row kernels (avx512/, avx2/, neon/patch_embed.cpp, generic/kernels.cpp): a row
// of patches from the image's rows in order, shared by the paths, which give only the copy of one image row's
// segments of other widths. Plain C++: the seeds' 4-pixel patches are a 16-byte memcpy of constant size, one
// vector move on any target.
#pragma once
#include <cstdint>
#include <cstring>

namespace vit::cpu::patch_rows {

// A row of patches (py of sample b) into out (Gw patches of K = C Ph Pw floats): row i of
// channel c is Gw segments of Pw floats, each to its patch's row (K floats apart).
// Segments(dst, src, K, Pw, Gw) copies one image row's Gw segments for Pw other than 4.
template <auto Segments>
void copy_row_of_patches(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi, int64_t Wi,
                         int64_t Ph, int64_t Pw, int64_t Gw) {
  const int64_t K = C * Ph * Pw;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < Ph; ++i) {
      const float* src = x + ((b * C + c) * Hi + py * Ph + i) * Wi;
      float* dst = out + (c * Ph + i) * Pw;
      if (Pw == 4)
        for (int64_t px = 0; px < Gw; ++px) std::memcpy(dst + px * K, src + px * 4, 4 * sizeof(float));
      else
        Segments(dst, src, K, Pw, Gw);
    }
}

}  // namespace vit::cpu::patch_rows
