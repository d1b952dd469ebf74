// Exact GELU (nn.GELU(approximate='none')), forward and backward.
#include <cmath>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

void gelu_forward(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * float(M_SQRT1_2)));
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  // d/dx [x Phi(x)] = Phi(x) + x phi(x)
  const float inv_sqrt_2pi = 0.3989422804014327f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float cdf = 0.5f * (1.f + std::erf(v * float(M_SQRT1_2)));
    float pdf = inv_sqrt_2pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

}  // namespace vit::cpu
