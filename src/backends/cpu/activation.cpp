// The MLP's activations besides exact GELU (gelu.cpp): GELU's tanh approximation
// (nn.GELU(approximate='tanh'), SigLIP's) and QuickGELU (x sigmoid(1.702 x), OpenAI's CLIP).
// Plain loops, element-wise, split over the threads by OpenMP's static schedule: the same bits
// on any thread count. Their derivatives are kept for bias_gelu_backward, which only
// multiplies by them.
#include <cmath>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kTanhCubic = 0.044715f, kQuick = 1.702f;

// act(v), and act'(v) in *grad when grad is not null.
inline float activate(float v, Activation act, float* grad) {
  if (act == Activation::quick_gelu) {
    const float s = 1.f / (1.f + std::exp(-kQuick * v));
    if (grad) *grad = s + kQuick * v * s * (1.f - s);
    return v * s;
  }
  // gelu_tanh: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
  const float t = std::tanh(kSqrt2OverPi * (v + kTanhCubic * v * v * v));
  if (grad)
    *grad = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kTanhCubic * v * v);
  return 0.5f * v * (1.f + t);
}

}  // namespace

void act_forward(float* y, const float* x, int64_t n, Activation act) {
  if (act == Activation::gelu) return gelu_forward(y, x, n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = activate(x[i], act, nullptr);
}

void bias_act_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad,
                      Activation act) {
  if (act == Activation::gelu) return bias_gelu_forward(y, h, bias, M, N, keep_grad);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < N; ++j) {
      float g = 0.f;
      y[r * N + j] = activate(h[r * N + j] + bias[j], act, keep_grad ? &g : nullptr);
      if (keep_grad) h[r * N + j] = g;
    }
}

}  // namespace vit::cpu
