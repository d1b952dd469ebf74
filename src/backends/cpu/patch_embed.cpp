// Patch embedding pieces around a linear layer: a Conv2d with kernel = stride = patch is
// im2col (one row per patch, in the conv weight's (c, i, j) order) times weight^T.
#include <cstring>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/neon/kernels.h"

namespace vit::cpu {

namespace {
// The path's copy of a row of patches of at most 16 pixels a row in vector moves, or null
// where it has none: the plain loop below then runs (the same values: a copy).
using PatchRowCopy = void (*)(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                              int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw);
PatchRowCopy patch_row_copy() {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512: return avx512::copy_patch_row_short;
    case Isa::avx2: return avx2::copy_patch_row_short;
#endif
#if VIT_ISA_NEON
    case Isa::neon: return neon::copy_patch_row_short;
#endif
    default: return nullptr;
  }
}
}  // namespace

void im2col_patches(float* cols, const float* x, int64_t B, int64_t C, int64_t Hi, int64_t Wi, int64_t Ph,
                    int64_t Pw) {
  const int64_t Gh = Hi / Ph, Gw = Wi / Pw, K = C * Ph * Pw;
  const PatchRowCopy copy_short = Pw <= 16 ? patch_row_copy() : nullptr;
  // One item per row of patches, walked along the image's rows: at MNIST's 16-float patches,
  // one item per patch spent most of its time on the three integer divisions giving its
  // (b, py, px), and reading 4 image rows per patch was slower than one row at a time
  // (mnist-seed/b64, 1 thread: 38 -> 8 us; cifar-seed/b256: 425 -> 218 us).
#pragma omp parallel for schedule(static)
  for (int64_t by = 0; by < B * Gh; ++by) {
    const int64_t b = by / Gh, py = by % Gh;
    float* out = cols + by * Gw * K;
    if (copy_short) {
      copy_short(out, x, b, py, C, Hi, Wi, Ph, Pw, Gw);
      continue;
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Ph; ++i) {
        const float* src = x + ((b * C + c) * Hi + py * Ph + i) * Wi;
        float* dst = out + (c * Ph + i) * Pw;
        for (int64_t px = 0; px < Gw; ++px) std::memcpy(dst + px * K, src + px * Pw, Pw * sizeof(float));
      }
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
