// patch_embed.cpp's copy of short patch rows (Pw <= 16) in AVX2 masked vector moves, where a
// memcpy call costs more than the copy; the walk is patch_rows.h's. Declared in kernels.h.
#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/patch_rows.h"

namespace vit::cpu::avx2 {

namespace {
// One image row's Gw segments of Pw floats, each to its patch's row (K floats apart).
VIT_AVX2 void copy_segments(float* dst, const float* src, int64_t K, int64_t Pw, int64_t Gw) {
  for (int64_t px = 0; px < Gw; ++px) copy_short(dst + px * K, src + px * Pw, Pw);
}
}  // namespace

void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                          int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw) {
  patch_rows::copy_row_of_patches<copy_segments>(out, x, b, py, C, Hi, Wi, Ph, Pw, Gw);
}

}  // namespace vit::cpu::avx2
