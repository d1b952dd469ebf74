// Dropout and drop path (stochastic depth) with counter-based masks: element i of a site
// is kept when uniform_at(key, i) >= p, so backward regenerates the forward's mask.
#include "backends/cpu/cpu.h"
#include "vit/core/rng.h"

namespace vit::cpu {

void dropout_forward(float* x, int64_t n, float p, uint64_t key) {
  if (p <= 0.f) return;
  const float s = 1.f / (1.f - p);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = uniform_at(key, i) >= p ? x[i] * s : 0.f;
}

void dropout_backward(float* dx, int64_t n, float p, uint64_t key) {
  dropout_forward(dx, n, p, key);
}

namespace {
// Per-sample scale of the branch under drop path: 0 or 1/(1-p).
inline float path_scale(int64_t b, float path_p, uint64_t path_key) {
  if (path_p <= 0.f) return 1.f;
  return uniform_at(path_key, b) >= path_p ? 1.f / (1.f - path_p) : 0.f;
}
}  // namespace

void residual_forward(float* out, const float* x, float* branch, int64_t B, int64_t R, float drop_p,
                      uint64_t drop_key, float path_p, uint64_t path_key) {
  dropout_forward(branch, B * R, drop_p, drop_key);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    const float s = path_scale(b, path_p, path_key);
    for (int64_t r = 0; r < R; ++r) out[b * R + r] = x[b * R + r] + s * branch[b * R + r];
  }
}

void residual_backward(float* dbranch, const float* dout, int64_t B, int64_t R, float drop_p,
                       uint64_t drop_key, float path_p, uint64_t path_key) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    const float s = path_scale(b, path_p, path_key);
    for (int64_t r = 0; r < R; ++r) dbranch[b * R + r] = s * dout[b * R + r];
  }
  dropout_backward(dbranch, B * R, drop_p, drop_key);
}

}  // namespace vit::cpu
