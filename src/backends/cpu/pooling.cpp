// Pooling of the token sequence for the head: timm's global_pool 'token' (row 0, and row 1
// for DeiT's distilled head) or 'avg' (mean of the patch tokens, here only the visible ones
// when a patch mask is given).
#include <cstring>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

namespace {
inline float visible_count(const uint8_t* m, int64_t n) {
  if (!m) return float(n);
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += m[i] != 0;
  return float(k > 0 ? k : 1);
}
}  // namespace

void pool_forward(float* pooled, const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C,
                  bool avg, int64_t first, int64_t K) {
  const int64_t n = T - first;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    float* out = pooled + b * C;
    if (!avg) {
      for (int64_t k = 0; k < K; ++k) std::memcpy(out + k * B * C, x + (b * T + k) * C, C * sizeof(float));
      continue;
    }
    const uint8_t* m = mask ? mask + b * n : nullptr;
    std::memset(out, 0, C * sizeof(float));
    for (int64_t t = 0; t < n; ++t)
      if (!m || m[t])
        for (int64_t c = 0; c < C; ++c) out[c] += x[(b * T + first + t) * C + c];
    const float inv = 1.f / visible_count(m, n);
    for (int64_t c = 0; c < C; ++c) out[c] *= inv;
  }
}

void pool_backward(float* dx, const float* dpooled, const uint8_t* mask, int64_t B, int64_t T, int64_t C,
                   bool avg, int64_t first, int64_t K) {
  const int64_t n = T - first;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    float* d = dx + b * T * C;
    std::memset(d, 0, T * C * sizeof(float));
    const float* g = dpooled + b * C;
    if (!avg) {
      for (int64_t k = 0; k < K; ++k) std::memcpy(d + k * C, g + k * B * C, C * sizeof(float));
      continue;
    }
    const uint8_t* m = mask ? mask + b * n : nullptr;
    const float inv = 1.f / visible_count(m, n);
    for (int64_t t = 0; t < n; ++t)
      if (!m || m[t])
        for (int64_t c = 0; c < C; ++c) d[(first + t) * C + c] = g[c] * inv;
  }
}

void first_tokens(float* out, const float* x, int64_t B, int64_t T, int64_t C, int64_t Q) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) std::memcpy(out + b * Q * C, x + b * T * C, size_t(Q * C) * sizeof(float));
}

void first_tokens_backward(float* dx, const float* dout, int64_t B, int64_t T, int64_t C, int64_t Q) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(dx + b * T * C, dout + b * Q * C, size_t(Q * C) * sizeof(float));
    std::memset(dx + (b * T + Q) * C, 0, size_t((T - Q) * C) * sizeof(float));
  }
}

}  // namespace vit::cpu
