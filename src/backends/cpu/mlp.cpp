// A transformer block's MLP, y = fc2(dropout(act(fc1(x)))), on the products its weights were
// prepared for. bf16 inference fuses the activation into fc1's matmul and keeps the hidden
// activations in bf16; int8 runs it a chunk of rows at a time (mlp_forward_int8); packed fp32 applies GELU in
// fc1's kernel (the other activations in a pass after it); otherwise fc1's bias goes in with the activation
// pass (bias_gelu_forward, bias_act_forward), which keeps the activation's derivative for the backward, so
// the backward is the same for every activation.
#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"

namespace vit::cpu {

void mlp_forward(float* y, const float* x, const LinearOperand& fc1, const LinearOperand& fc2,
                 const MlpBuffers& a, int64_t M, bool keep_grad, float drop_p, uint64_t drop_key,
                 int64_t drop_first, Activation act) {
  const int64_t C = fc1.K, Hd = fc1.N;
  const bool gelu = act == Activation::gelu;
  if (fc1.precision == Precision::bf16)
    return mlp_forward_bf16(y, x, *fc1.bf16, fc1.b, *fc2.bf16, fc2.b, M, act);
  if (fc1.precision == Precision::int8)  // inference only: no dropout
    return mlp_forward_int8(y, x, *fc1.int8, fc1.b, *fc2.int8, fc2.b, M, act);
  if (fc1.packed) {  // inference only: no dropout
    linear_forward_packed(a.act, x, fc1.w, fc1.b, M, C, Hd, gelu);
    if (!gelu) act_forward(a.act, a.act, M * Hd, act);
    return linear_forward_packed(y, a.act, fc2.w, fc2.b, M, Hd, fc2.N);
  }
  if (fc1.precision == Precision::amp) {
    round_to_bf16(a.x_bf16, x, M * C);
    linear_forward_amp(a.h, a.x_bf16, fc1.w_bf16, nullptr, M, C, Hd);
  } else {
    linear_forward(a.h, x, fc1.w, nullptr, M, C, Hd, *a.h_zero);
  }
  bias_act_forward(a.act, a.h, fc1.b, M, Hd, keep_grad, act);  // GELU: its vector kernels
  *a.h_zero = false;
  dropout_forward(a.act, M * Hd, drop_p, drop_key, drop_first);
  linear_forward(y, a.act, a.act_bf16, fc2, M, false);
}

void mlp_backward(float* dx, float* dact, float* dw1, float* db1, float* dw2, float* db2, const float* dy,
                  const float* x, const LinearOperand& fc1, const LinearOperand& fc2, const MlpBuffers& a,
                  int64_t M, float drop_p, uint64_t drop_key, int64_t drop_first) {
  const int64_t C = fc1.K, Hd = fc1.N;
  linear_backward(dact, dw2, db2, dy, a.act, a.act_bf16, fc2, M, false);
  dropout_backward(dact, M * Hd, drop_p, drop_key, drop_first);
  // h holds GELU' of fc1's output; fc1's bias gradient comes with it. h is cleared on the way
  // where the next forward's fc1 product is faster adding onto zeros (a oneDNN store stall).
  *a.h_zero = fc1.precision == Precision::fp32 && adds_onto_zeros(M, Hd, C);
  bias_gelu_backward(dact, db1, dact, a.h, M, Hd, *a.h_zero);
  linear_backward(dx, dw1, nullptr, dact, x, a.x_bf16, fc1, M, false);
}

}  // namespace vit::cpu
