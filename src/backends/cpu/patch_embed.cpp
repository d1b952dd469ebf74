// Patch embedding pieces around a linear layer: a Conv2d with kernel = stride = patch is
// im2col (one row per patch, in the conv weight's (c, i, j) order) times weight^T.
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"

namespace vit::cpu {

namespace {
// Patch row (c, i) of patch bn: Pw floats. Short ones (MNIST's 4-pixel patches: 16 bytes,
// 196 a sample) in vector moves, where a memcpy call costs more than the copy.
VIT_AVX512 void copy_patch_rows_short(float* row, const float* x, int64_t b, int64_t py, int64_t px,
                                      int64_t C, int64_t Hi, int64_t Wi, int64_t Ph, int64_t Pw) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < Ph; ++i)
      simd::copy_short(row + (c * Ph + i) * Pw, x + ((b * C + c) * Hi + py * Ph + i) * Wi + px * Pw, Pw);
}
}  // namespace

void im2col_patches(float* cols, const float* x, int64_t B, int64_t C, int64_t Hi, int64_t Wi, int64_t Ph,
                    int64_t Pw) {
  const int64_t Gh = Hi / Ph, Gw = Wi / Pw, N = Gh * Gw, K = C * Ph * Pw;
  const bool short_rows = Pw <= 16 && simd::avx512();
#pragma omp parallel for schedule(static)
  for (int64_t bn = 0; bn < B * N; ++bn) {
    const int64_t b = bn / N, py = (bn % N) / Gw, px = bn % Gw;
    float* row = cols + bn * K;
    if (short_rows) {
      copy_patch_rows_short(row, x, b, py, px, C, Hi, Wi, Ph, Pw);
      continue;
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Ph; ++i)
        std::memcpy(row + (c * Ph + i) * Pw, x + ((b * C + c) * Hi + py * Ph + i) * Wi + px * Pw,
                    Pw * sizeof(float));
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
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    const float* src = token_src(pe, cls, reg, b, t, N, C, P, has_cls);
    float* dst = tokens + bt * C;
    const float* p = pos_all ? pos + t * C : (t >= P ? pos + (t - P) * C : nullptr);
    if (p)
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c] + p[c];
    else
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c];
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
