// GELU's kernels per instruction set (gelu.cpp dispatches to them): each works on the range
// it is given, on the calling thread; gelu.cpp splits the work over the threads.
//   gelu_forward:   y[i] = GELU(x[i]) for i in [i0, i1)
//   gelu_backward:  dx[i] = dy[i] GELU'(x[i]) for i in [i0, i1)
//   bias_gelu_rows: rows [r0, r1) of h[., N]: v = h + bias, y = GELU(v), h = GELU'(v) when keep_grad
//   bias_gelu_backward_columns (AVX2, NEON): columns [j0, j1) of dx[M, N] = dy * grad over
//     all rows, db[j0, j1) += their column sums in colsum_columns' order (the same bits as the
//     multiply followed by colsum_add), grad cleared behind when clear_grad
//   act_rows: as bias_gelu_rows for GELU's tanh form and QuickGELU (activation.cpp), bias
//     optional (null: v = h, and h is only read unless keep_grad)
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"  // by_column_blocks
#include "core/activation.h"

namespace vit::cpu {

inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.3989422804014327f;
// GELU's tanh form 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) and QuickGELU v sigmoid(1.702 v).
inline constexpr float kSqrt2OverPi = 0.7978845608028654f, kTanhCubic = 0.044715f, kQuick = 1.702f;

// f.template operator()<A, G>() for the activation act (GELU's tanh form or QuickGELU) and
// G = keep_grad: each path's act_rows picks its kernel's instantiation with it.
template <typename F>
void with_activation(Activation act, bool keep_grad, F&& f) {
  if (act == Activation::quick_gelu)
    return keep_grad ? f.template operator()<Activation::quick_gelu, true>()
                     : f.template operator()<Activation::quick_gelu, false>();
  return keep_grad ? f.template operator()<Activation::gelu_tanh, true>()
                   : f.template operator()<Activation::gelu_tanh, false>();
}

// The kernels every path has, declared once and expanded in each path's namespace.
#define VIT_GELU_KERNELS                                                                                  \
  void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1);                                    \
  void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1);                 \
  void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,           \
                      bool keep_grad);                                                                    \
  void act_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, bool keep_grad, \
                Activation act);

namespace avx512 {
VIT_GELU_KERNELS
// cpu::bias_gelu_backward whole (its threads too): dx = dy * grad with the column sums of dx
// added to db in colsum_add's order, in the same pass.
void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad);
}  // namespace avx512

// The table's bias_gelu_backward (kernel_set.h) from a path's bias_gelu_backward_columns: one
// range of colsum_add's column blocks per thread.
template <auto Columns>
void bias_gelu_backward_by_columns(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                   bool clear_grad) {
  by_column_blocks(N, M * N,
                   [&](int64_t j0, int64_t j1) { Columns(dx, db, dy, grad, M, N, j0, j1, clear_grad); });
}

#define VIT_GELU_BACKWARD_COLUMNS                                                                           \
  void bias_gelu_backward_columns(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N, \
                                  int64_t j0, int64_t j1, bool clear_grad);

namespace avx2 {
VIT_GELU_KERNELS
VIT_GELU_BACKWARD_COLUMNS
}  // namespace avx2

namespace neon {
VIT_GELU_KERNELS
VIT_GELU_BACKWARD_COLUMNS
}  // namespace neon

#undef VIT_GELU_BACKWARD_COLUMNS

#undef VIT_GELU_KERNELS

}  // namespace vit::cpu
