// The MLP's activations besides exact GELU (gelu.cpp): GELU's tanh approximation
// (nn.GELU(approximate='tanh'), SigLIP's) and QuickGELU (x sigmoid(1.702 x), OpenAI's CLIP).
// The kernel table's act_rows (kernel_set.h: each path's gelu.h kernel, or generic/gelu.cpp's
// plain loops), split over the threads in fixed ranges: the same bits on any thread count. Their
// derivatives are kept for bias_gelu_backward, which only multiplies by them.
#include "backends/cpu/cpu.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

void act_forward(float* y, const float* x, int64_t n, Activation act) {
  if (act == Activation::gelu) return gelu_forward(y, x, n);
  // Each chunk as one row; h is only read without keep_grad.
  const ActRows rows = kernels().act_rows;
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) {
    rows(y + i0, const_cast<float*>(x) + i0, nullptr, i1 - i0, 0, 1, false, act);
  });
}

void bias_act_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad,
                      Activation act) {
  if (act == Activation::gelu) return bias_gelu_forward(y, h, bias, M, N, keep_grad);
  const ActRows rows = kernels().act_rows;
  by_row_ranges(M, N, [&](int64_t r0, int64_t r1) { rows(y, h, bias, N, r0, r1, keep_grad, act); });
}

}  // namespace vit::cpu
