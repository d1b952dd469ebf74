// patch_embed.cpp's copy of short patch rows (Pw <= 16) in NEON vector moves, where a memcpy
// call costs more than the copy; the walk is patch_rows.h's. Declared in kernels.h.
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"
#include "backends/cpu/patch_rows.h"

namespace vit::cpu::neon {

namespace {
// One image row's Gw segments of Pw floats, each to its patch's row (K floats apart): whole
// vectors, then a tail of fewer than 4 through simd.h's load and store.
void copy_segments(float* dst, const float* src, int64_t K, int64_t Pw, int64_t Gw) {
  for (int64_t px = 0; px < Gw; ++px)
    for (int64_t j = 0; j < Pw; j += 4) store(dst + px * K + j, Pw - j, load(src + px * Pw + j, Pw - j));
}
}  // namespace

void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                          int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw) {
  patch_rows::copy_row_of_patches<copy_segments>(out, x, b, py, C, Hi, Wi, Ph, Pw, Gw);
}

}  // namespace vit::cpu::neon
