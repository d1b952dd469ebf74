// The MLP's activations besides exact GELU (gelu.cpp): GELU's tanh approximation
// (nn.GELU(approximate='tanh'), SigLIP's) and QuickGELU (x sigmoid(1.702 x), OpenAI's CLIP).
// Each path's vector kernel (gelu.h's act_rows), or the plain loops below on the generic path,
// split over the threads in fixed ranges: the same bits on any thread count. Their
// derivatives are kept for bias_gelu_backward, which only multiplies by them.
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gelu.h"

namespace vit::cpu {

namespace {

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

// Rows [r0, r1) of N columns: v = h (+ bias), y = act(v), and h = act'(v) when keep_grad, on the
// path's kernel.
void act_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, bool keep_grad,
              Activation act) {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512: return avx512::act_rows(y, h, bias, N, r0, r1, keep_grad, act);
    case Isa::avx2: return avx2::act_rows(y, h, bias, N, r0, r1, keep_grad, act);
#endif
#if VIT_ISA_NEON
    case Isa::neon: return neon::act_rows(y, h, bias, N, r0, r1, keep_grad, act);
#endif
    default: break;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; ++j) {
      float g = 0.f;
      y[r * N + j] = activate(h[r * N + j] + (bias ? bias[j] : 0.f), act, keep_grad ? &g : nullptr);
      if (keep_grad) h[r * N + j] = g;
    }
}

}  // namespace

void act_forward(float* y, const float* x, int64_t n, Activation act) {
  if (act == Activation::gelu) return gelu_forward(y, x, n);
  // Each chunk as one row; h is only read without keep_grad.
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) {
    act_rows(y + i0, const_cast<float*>(x) + i0, nullptr, i1 - i0, 0, 1, false, act);
  });
}

void bias_act_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad,
                      Activation act) {
  if (act == Activation::gelu) return bias_gelu_forward(y, h, bias, M, N, keep_grad);
  by_row_ranges(M, N, [&](int64_t r0, int64_t r1) { act_rows(y, h, bias, N, r0, r1, keep_grad, act); });
}

}  // namespace vit::cpu
