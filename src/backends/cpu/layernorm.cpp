// LayerNorm over the last dimension (nn.LayerNorm, biased variance), forward and backward.
#include <cmath>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t M, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* xi = x + i * C;
    float* yi = y + i * C;
    // Two passes in float (mean, then centered variance) to avoid cancellation.
    float m = 0.f;
    for (int64_t c = 0; c < C; ++c) m += xi[c];
    m /= C;
    float v = 0.f;
    for (int64_t c = 0; c < C; ++c) v += (xi[c] - m) * (xi[c] - m);
    v /= C;
    float s = 1.f / std::sqrt(v + eps);
    for (int64_t c = 0; c < C; ++c) yi[c] = (xi[c] - m) * s * w[c] + b[c];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int64_t M, int64_t C, bool accumulate_dx) {
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* xi = x + i * C;
    const float* dyi = dy + i * C;
    float m = mean[i], s = rstd[i];
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = 0; c < C; ++c) {
      float g = dyi[c] * w[c];
      sum_g += g;
      sum_gx += g * (xi[c] - m) * s;
    }
    sum_g /= C;
    sum_gx /= C;
    float* dxi = dx + i * C;
    for (int64_t c = 0; c < C; ++c) {
      float v = s * (dyi[c] * w[c] - sum_g - (xi[c] - m) * s * sum_gx);
      dxi[c] = accumulate_dx ? dxi[c] + v : v;
    }
  }
  // Parameter gradients: column blocks per thread, rows in order (deterministic).
  const int64_t blk = 16;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < C; j0 += blk) {
    int64_t j1 = j0 + blk < C ? j0 + blk : C;
    float aw[16] = {0}, ab[16] = {0};
    for (int64_t i = 0; i < M; ++i) {
      float m = mean[i], s = rstd[i];
      for (int64_t j = j0; j < j1; ++j) {
        float g = dy[i * C + j];
        aw[j - j0] += g * (x[i * C + j] - m) * s;
        ab[j - j0] += g;
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      dw[j] += aw[j - j0];
      db[j] += ab[j - j0];
    }
  }
}

}  // namespace vit::cpu
