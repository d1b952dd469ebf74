// Dropout with counter-based masks: element i of a site is kept when uniform_at(key, i) >= p,
// so backward regenerates the forward's mask.
#include "backends/cpu/cpu.h"
#include "core/rng.h"

namespace vit::cpu {

void dropout_forward(float* x, int64_t n, float p, uint64_t key, int64_t first) {
  if (p <= 0.f) return;
  const float s = 1.f / (1.f - p);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = uniform_at(key, uint64_t(first + i)) >= p ? x[i] * s : 0.f;
}

void dropout_backward(float* dx, int64_t n, float p, uint64_t key, int64_t first) {
  dropout_forward(dx, n, p, key, first);
}

}  // namespace vit::cpu
