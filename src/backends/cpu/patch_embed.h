// The short-row patch copy of the vector paths (avx512/ and neon/patch_embed.cpp; dispatched
// by patch_embed.cpp's im2col_patches for Pw <= 16): im2col_patches' row of patches py of
// sample b into out (Gw patches, C Ph Pw floats each), taken from the image's rows in order:
// row i of channel c is Gw segments of Pw floats, each to its patch's row (K floats apart).
// Short segments (the seeds' 4-pixel patches: 16 bytes) go in vector moves, where a memcpy
// call costs more. The walk is the same on every path; the moves are the path's own, so the
// walk is a macro expanded in each path's file with its target attribute (ATTR) after the
// path defines copy4(dst, src) (4 floats) and copy_short(dst, src, n) (n <= 16 floats): a
// template would be compiled without the attribute and could not inline them.
#pragma once
#include <cstdint>

#define VIT_COPY_PATCH_ROW_SHORT(ATTR)                                                                     \
  ATTR void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi, \
                                 int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw) {                         \
    const int64_t K = C * Ph * Pw;                                                                         \
    for (int64_t c = 0; c < C; ++c)                                                                        \
      for (int64_t i = 0; i < Ph; ++i) {                                                                   \
        const float* src = x + ((b * C + c) * Hi + py * Ph + i) * Wi;                                      \
        float* dst = out + (c * Ph + i) * Pw;                                                              \
        if (Pw == 4)                                                                                       \
          for (int64_t px = 0; px < Gw; ++px) copy4(dst + px * K, src + px * 4);                           \
        else                                                                                               \
          for (int64_t px = 0; px < Gw; ++px) copy_short(dst + px * K, src + px * Pw, Pw);                 \
      }                                                                                                    \
  }
