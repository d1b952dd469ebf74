// The linear layer on whatever form the model prepared its weights in: the product each
// form asks for (plain sgemm-based, packed in place, bf16 copy, int8 copy, amp operands).
#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"

namespace vit::cpu {

void linear_forward(float* y, const float* x, uint16_t* x_bf16, const LinearOperand& w, int64_t M,
                    bool gelu) {
  const int64_t K = w.K, N = w.N;
  switch (w.precision) {
    case Precision::bf16: linear_forward_bf16(y, x, *w.bf16, w.b, M); break;
    case Precision::int8: return linear_forward_int8(y, x, *w.int8, w.b, M, gelu);
    case Precision::amp:
      round_to_bf16(x_bf16, x, M * K);
      linear_forward_amp(y, x_bf16, w.w_bf16, w.b, M, K, N);
      break;
    case Precision::fp32:
      // Packed weights apply GELU as the outputs leave the registers.
      if (w.packed) return linear_forward_packed(y, x, w.w, w.b, M, K, N, gelu);
      linear_forward(y, x, w.w, w.b, M, K, N);
      break;
  }
  if (gelu) gelu_forward(y, y, M * N);
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const uint16_t* x_bf16,
                     const LinearOperand& w, int64_t M, bool accumulate_dx) {
  if (w.precision == Precision::amp)
    return linear_backward_amp(dx, dw, db, dy, x_bf16, w.w_bf16, M, w.K, w.N);
  linear_backward(dx, dw, db, dy, x, w.w, M, w.K, w.N, accumulate_dx);
}

}  // namespace vit::cpu
