// Patch embedding pieces around a linear layer: a Conv2d with kernel = stride = patch is
// im2col (one row per patch, in the conv weight's (c, i, j) order) times weight^T.
#include <cstring>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

void im2col_patches(float* cols, const float* x, int64_t B, int64_t C, int64_t Hi, int64_t Wi, int64_t Ph,
                    int64_t Pw) {
  const int64_t Gh = Hi / Ph, Gw = Wi / Pw, N = Gh * Gw, K = C * Ph * Pw;
#pragma omp parallel for schedule(static)
  for (int64_t bn = 0; bn < B * N; ++bn) {
    const int64_t b = bn / N, py = (bn % N) / Gw, px = bn % Gw;
    float* row = cols + bn * K;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Ph; ++i)
        std::memcpy(row + (c * Ph + i) * Pw, x + ((b * C + c) * Hi + py * Ph + i) * Wi + px * Pw,
                    Pw * sizeof(float));
  }
}

void tokens_forward(float* tokens, const float* pe, const float* cls, const float* pos, int64_t B, int64_t N,
                    int64_t C, bool has_cls) {
  const int64_t T = N + (has_cls ? 1 : 0);
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    const float* src = (has_cls && t == 0) ? cls : pe + (b * N + t - (has_cls ? 1 : 0)) * C;
    const float* p = pos + t * C;
    float* dst = tokens + bt * C;
    for (int64_t c = 0; c < C; ++c) dst[c] = src[c] + p[c];
  }
}

void tokens_backward(float* dpe, float* dcls, float* dpos, const float* dtokens, int64_t B, int64_t N,
                     int64_t C, bool has_cls) {
  const int64_t T = N + (has_cls ? 1 : 0), off = has_cls ? 1 : 0;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dpe + b * N * C, dtokens + (b * T + off) * C, N * C * sizeof(float));
  if (dcls)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) dcls[c] += dtokens[b * T * C + c];
  if (dpos) {
    // Row t of dpos sums over the batch, in batch order.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) dpos[t * C + c] += dtokens[(b * T + t) * C + c];
  }
}

}  // namespace vit::cpu
