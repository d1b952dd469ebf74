// Patch embedding pieces around a linear layer: a Conv2d with kernel = stride = patch is
// im2col (one row per patch, in the conv weight's (c, i, j) order) times weight^T.
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

void im2col_patches(float* cols, const float* x, int64_t B, int64_t C, int64_t Hi, int64_t Wi, int64_t Ph,
                    int64_t Pw) {
  const int64_t Gh = Hi / Ph, Gw = Wi / Pw, K = C * Ph * Pw;
  // Rows of patches at most 16 pixels wide in the kernel table's vector moves (kernel_set.h),
  // wider ones in memcpy's (the same values: a copy).
  const CopyPatchRow copy = Pw <= 16 ? kernels().copy_patch_row_short : copy_patch_row;
  // One item per row of patches, walked along the image's rows: at MNIST's 16-float patches,
  // one item per patch spent most of its time on the three integer divisions giving its
  // (b, py, px), and reading 4 image rows per patch was slower than one row at a time
  // (docs/design.md, "Fast kernels and threads").
#pragma omp parallel for schedule(static)
  for (int64_t by = 0; by < B * Gh; ++by) {
    const int64_t b = by / Gh, py = by % Gh;
    copy(cols + by * Gw * K, x, b, py, C, Hi, Wi, Ph, Pw, Gw);
  }
}

namespace {
// Source row of token t of sample b: the class token, a register token or a patch.
inline const float* token_src(const float* pe, const float* cls, const float* reg, int64_t b, int64_t t,
                              int64_t N, int64_t C, int64_t P, bool has_cls) {
  if (t >= P) return pe + (b * N + t - P) * C;
  if (has_cls && t == 0) return cls;
  return reg + (t - (has_cls ? 1 : 0)) * C;
}
}  // namespace

void tokens_forward(float* tokens, const float* pe, const float* cls, const float* reg, const float* pos,
                    int64_t B, int64_t N, int64_t C, int64_t R, bool has_cls, bool pos_all) {
  const int64_t P = (has_cls ? 1 : 0) + R, T = N + P;
  // collapse(2): (b, t) counted per thread, not divided out per token.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float* src = token_src(pe, cls, reg, b, t, N, C, P, has_cls);
      float* dst = tokens + (b * T + t) * C;
      const float* p = pos_all ? pos + t * C : (t >= P ? pos + (t - P) * C : nullptr);
      if (p) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) dst[c] = src[c] + p[c];
      } else {
        std::memcpy(dst, src, size_t(C) * sizeof(float));
      }
    }
}

void tokens_backward(float* dpe, float* dcls, float* dreg, float* dpos, const float* dtokens, int64_t B,
                     int64_t N, int64_t C, int64_t R, bool has_cls, bool pos_all) {
  const int64_t P = (has_cls ? 1 : 0) + R, T = N + P;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dpe + b * N * C, dtokens + (b * T + P) * C, N * C * sizeof(float));
  // Prefix tokens sum over the batch, in batch order.
  for (int64_t t = 0; t < P; ++t) {
    float* d = (has_cls && t == 0) ? dcls : (dreg ? dreg + (t - (has_cls ? 1 : 0)) * C : nullptr);
    if (!d) continue;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) d[c] += dtokens[(b * T + t) * C + c];
  }
  if (dpos) {
    const int64_t first = pos_all ? 0 : P;
#pragma omp parallel for schedule(static)
    for (int64_t t = first; t < T; ++t)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) dpos[(t - first) * C + c] += dtokens[(b * T + t) * C + c];
  }
}

}  // namespace vit::cpu
