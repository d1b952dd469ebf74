// The generic path's activations: exact GELU (std::erf), its tanh form and QuickGELU in
// plain loops on the range or rows they are given (gelu.cpp and activation.cpp split the
// threads), and the backward's plain multiply and column sums: the kernel table's generic
// entries (kernel_set.h), and what the tests hold the vector paths to.
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

namespace {
// act(v), and act'(v) in *grad when grad is not null: GELU's tanh form or QuickGELU.
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

void gelu_forward_range(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * kInvSqrt2));
}

void gelu_backward_range(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float v = x[i];
    const float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

void bias_gelu_rows_reference(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                              bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; ++j) {
      const float v = h[r * N + j] + bias[j];
      const float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
      y[r * N + j] = v * cdf;  // 0.5 v (1 + erf) with one erf: halving is exact
      if (keep_grad) h[r * N + j] = cdf + v * (kInvSqrt2Pi * std::exp(-0.5f * v * v));
    }
}

void act_rows_reference(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                        bool keep_grad, Activation act) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; ++j) {
      float g = 0.f;
      y[r * N + j] = activate(h[r * N + j] + (bias ? bias[j] : 0.f), act, keep_grad ? &g : nullptr);
      if (keep_grad) h[r * N + j] = g;
    }
}

void bias_gelu_backward_reference(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                  bool clear_grad) {
  // The multiply (vectorized by the compiler), then colsum_add's loop.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M * N; ++i) {
    dx[i] = dy[i] * grad[i];
    if (clear_grad) grad[i] = 0.f;
  }
  by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) { colsum_columns_reference(db, dx, M, N, j0, j1); });
}

}  // namespace vit::cpu
