// Copies, fills, sums and row maxima on host memory: the model's and the training step's
// bookkeeping that is not arithmetic of a layer.
#include <cstring>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

void copy_values(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, sizeof(float) * size_t(n));
}

void fill_values(float* x, int64_t n, float value) {
  std::fill(x, x + n, value);
}

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void scale_values(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void mean_of_two(float* dst, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = (a[i] + b[i]) * 0.5f;
}

void argmax_rows(int64_t* out, const float* x, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    int64_t best = 0;
    for (int64_t k = 1; k < N; ++k)
      if (x[i * N + k] > x[i * N + best]) best = k;
    out[i] = best;
  }
}

}  // namespace vit::cpu
