// GELU's kernels per instruction set (gelu.cpp dispatches to them): each works on the range
// it is given, on the calling thread; gelu.cpp splits the work over the threads.
//   gelu_forward:   y[i] = GELU(x[i]) for i in [i0, i1)
//   gelu_backward:  dx[i] = dy[i] GELU'(x[i]) for i in [i0, i1)
//   bias_gelu_rows: rows [r0, r1) of h[., N]: v = h + bias, y = GELU(v), h = GELU'(v) when keep_grad
//   bias_gelu_backward_columns (AVX2, NEON): columns [j0, j1) of dx[M, N] = dy * grad over
//     all rows, db[j0, j1) += their column sums in colsum_columns' order (the same bits as the
//     multiply followed by colsum_add), grad cleared behind when clear_grad
#pragma once
#include <cstdint>

namespace vit::cpu {

inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// The kernels every path has, declared once and expanded in each path's namespace.
#define VIT_GELU_KERNELS                                                                        \
  void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1);                          \
  void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1);       \
  void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, \
                      bool keep_grad);

namespace avx512 {
VIT_GELU_KERNELS
// cpu::bias_gelu_backward whole (its threads too): dx = dy * grad with the column sums of dx
// added to db in colsum_add's order, in the same pass.
void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad);
}  // namespace avx512

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
